import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';

type Line = { ID: string; Item: Record<string, unknown> };

describe.each(backends())('lists on %s', (backend) => {
  let s: TestService;
  /** Groups created for these tests, by name. */
  const ids: Record<string, string> = {};
  const names = ['delta', 'alpha', 'echo', 'charlie', 'bravo', 'foxtrot', 'golf'];

  const list = async (query: string) => {
    const res = await s.req({ method: 'GET', url: `/groups${query}` });
    expect(res.statusCode, res.body).toBe(200);
    return { res, lines: jsonLines(res.body) as Line[] };
  };
  const namesOf = (lines: Line[]) => lines.map((l) => l.Item.Name);

  beforeAll(async () => {
    s = await startTestService(backend);
    for (const [i, name] of names.entries()) {
      const r = await s.req({
        method: 'POST',
        url: '/groups',
        payload: {
          Name: name,
          IntegrityLevel: i % 3,
          RequiresApproval: i % 2 === 0,
          Description: i < 3 ? 'x' : 'y',
        },
      });
      expect(r.statusCode).toBe(201);
      ids[name] = r.headers['x-id'] as string;
    }
  });
  afterAll(async () => s?.close());

  it('returns every object as a ListItem line with content type application/x-json-lines', async () => {
    const { res, lines } = await list('');
    expect(res.headers['content-type']).toBe('application/x-json-lines');
    expect(lines).toHaveLength(names.length);
    for (const l of lines) expect(l.ID).toBe(l.Item.ID);
    expect(res.headers['x-start-cursor']).toBeUndefined();
    expect(res.headers['x-end-cursor']).toBeUndefined();
  });

  it('orders by a field, by several, and reversed with a leading -', async () => {
    expect(namesOf((await list('?order=Name')).lines)).toEqual([...names].sort());
    expect(namesOf((await list('?order=-Name')).lines)).toEqual([...names].sort().reverse());
    const multi = (await list('?order=IntegrityLevel&order=-Name')).lines;
    const expected = names
      .map((n, i) => ({ n, l: i % 3 }))
      .sort((a, b) => a.l - b.l || (a.n < b.n ? 1 : -1))
      .map((x) => x.n);
    expect(namesOf(multi)).toEqual(expected);
  });

  it('applies offset after ordering', async () => {
    expect(namesOf((await list('?order=Name&offset=2')).lines)).toEqual([...names].sort().slice(2));
    expect(namesOf((await list('?order=Name&offset=2&limit=3')).lines)).toEqual(
      [...names].sort().slice(2, 5),
    );
  });

  it('limits rows and sets cursor headers only below 1000', async () => {
    const { res, lines } = await list('?limit=2&order=Name');
    expect(lines).toHaveLength(2);
    expect(res.headers['x-start-cursor']).toBeTruthy();
    expect(res.headers['x-end-cursor']).toBeTruthy();
    const big = await list('?limit=1000');
    expect(big.res.headers['x-start-cursor']).toBeUndefined();
    expect(big.res.headers['x-end-cursor']).toBeUndefined();
    expect(big.lines).toHaveLength(names.length);
  });

  it('filters with each operator and intersects repeated filters', async () => {
    const f = (e: string) => `filter=${encodeURIComponent(e)}`;
    expect(namesOf((await list(`?${f('Name = "echo"')}`)).lines)).toEqual(['echo']);
    expect(namesOf((await list(`?order=Name&${f('Name < "charlie"')}`)).lines)).toEqual(['alpha', 'bravo']);
    expect(namesOf((await list(`?order=Name&${f('Name <= "charlie"')}`)).lines)).toEqual([
      'alpha',
      'bravo',
      'charlie',
    ]);
    expect(namesOf((await list(`?order=Name&${f('Name > "echo"')}`)).lines)).toEqual(['foxtrot', 'golf']);
    expect(namesOf((await list(`?order=Name&${f('Name >= "echo"')}`)).lines)).toEqual([
      'echo',
      'foxtrot',
      'golf',
    ]);
    const where = (p: (i: number) => boolean) => names.filter((_, i) => p(i)).sort();
    expect(namesOf((await list(`?order=Name&${f('IntegrityLevel = 2')}`)).lines)).toEqual(
      where((i) => i % 3 === 2),
    );
    expect(
      namesOf((await list(`?order=Name&${f('RequiresApproval = true')}&${f('IntegrityLevel >= 1')}`)).lines),
    ).toEqual(where((i) => i % 2 === 0 && i % 3 >= 1));
    expect(namesOf((await list(`?order=Name&${f('ID = ' + JSON.stringify(ids.bravo))}`)).lines)).toEqual([
      'bravo',
    ]);
  });

  it('filters users on timestamps and dotted paths', async () => {
    const mk = async (body: Record<string, unknown>) =>
      (await s.req({ method: 'POST', url: '/users', payload: body })).headers['x-id'] as string;
    const early = await mk({ SuspendAfter: '2027-01-01T00:00:00Z', Name: { FullName: 'Early' } });
    const late = await mk({ SuspendAfter: '2029-06-01T12:00:00Z', Name: { FullName: 'Late' } });
    const res = await s.req({
      method: 'GET',
      url: `/users?filter=${encodeURIComponent('SuspendAfter > "2028-01-01T00:00:00Z"')}`,
    });
    expect(jsonLines(res.body).map((l) => l.ID)).toEqual([late]);
    const range = await s.req({
      method: 'GET',
      url: `/users?filter=${encodeURIComponent('SuspendAfter >= "2026-12-31T22:00:00-02:00"')}&filter=${encodeURIComponent('SuspendAfter < "2029-01-01T00:00:00Z"')}`,
    });
    expect(jsonLines(range.body).map((l) => l.ID)).toEqual([early]);
    const byName = await s.req({
      method: 'GET',
      url: `/users?filter=${encodeURIComponent('Name.FullName = "Late"')}`,
    });
    expect(jsonLines(byName.body).map((l) => l.ID)).toEqual([late]);
  });

  it('iterates coherently with cursors: every record once, in order', async () => {
    const seen: string[] = [];
    let start = '';
    for (let page = 0; page < 20; page++) {
      const { res, lines } = await list(`?limit=3&order=Name&start=${encodeURIComponent(start)}`);
      seen.push(...(namesOf(lines) as string[]));
      if (lines.length < 3) break;
      start = res.headers['x-end-cursor'] as string;
    }
    expect(seen).toEqual([...names].sort());
  });

  it('start at X-Start-Cursor repeats the page; end at a cursor stops before it', async () => {
    const first = await list('?limit=3&order=Name');
    const again = await list(
      `?limit=3&order=Name&start=${encodeURIComponent(first.res.headers['x-start-cursor'] as string)}`,
    );
    expect(namesOf(again.lines)).toEqual(namesOf(first.lines));
    const second = await list(
      `?limit=3&order=Name&start=${encodeURIComponent(first.res.headers['x-end-cursor'] as string)}`,
    );
    expect(namesOf(second.lines)).toEqual([...names].sort().slice(3, 6));
    // Backwards: the rows before page 2's first record are page 1.
    const back = await list(
      `?limit=3&order=Name&end=${encodeURIComponent(second.res.headers['x-start-cursor'] as string)}`,
    );
    expect(namesOf(back.lines)).toEqual([...names].sort().slice(0, 3));
    const backTwo = await list(
      `?limit=2&order=Name&end=${encodeURIComponent(second.res.headers['x-start-cursor'] as string)}`,
    );
    expect(namesOf(backTwo.lines)).toEqual([...names].sort().slice(1, 3));
    // end is exclusive of the page and bounds an unlimited list too.
    const upTo = await list(
      `?order=Name&end=${encodeURIComponent(second.res.headers['x-end-cursor'] as string)}`,
    );
    expect(namesOf(upTo.lines)).toEqual([...names].sort().slice(0, 6));
    const window = await list(
      `?order=Name&start=${encodeURIComponent(first.res.headers['x-end-cursor'] as string)}&end=${encodeURIComponent(second.res.headers['x-end-cursor'] as string)}`,
    );
    expect(namesOf(window.lines)).toEqual([...names].sort().slice(3, 6));
  });

  it('visits every object present throughout exactly once while others are inserted and deleted', async () => {
    const before = namesOf((await list('?order=ID')).lines);
    const seen: string[] = [];
    let start = '';
    let n = 0;
    for (;;) {
      const { res, lines } = await list(`?limit=2&start=${encodeURIComponent(start)}`);
      seen.push(...lines.map((l) => l.ID));
      // Churn between pages: new groups land before and after the cursor.
      await s.req({ method: 'POST', url: '/groups', payload: { Name: `churn-${n++}` } });
      if (lines.length < 2) break;
      start = res.headers['x-end-cursor'] as string;
    }
    expect(new Set(seen).size).toBe(seen.length);
    for (const name of before) expect(seen).toContain(ids[name as string]);
  });

  it('returns every row without a limit (1,200 objects)', async () => {
    const many = await startTestService(backend);
    try {
      const batch = 50;
      for (let i = 0; i < 1200; i += batch) {
        await Promise.all(
          Array.from({ length: batch }, (_, j) =>
            many.req({ method: 'POST', url: '/apikeys', payload: { Name: `k${i + j}` } }),
          ),
        );
      }
      const res = await many.req({ method: 'GET', url: '/apikeys' });
      const lines = jsonLines(res.body);
      expect(lines).toHaveLength(1201); // + the admin key
      expect(new Set(lines.map((l) => l.ID)).size).toBe(1201);
    } finally {
      await many.close();
    }
  }, 120_000);

  it('rejects bad list parameters with 400 naming the problem', async () => {
    const cases: [string, string, string][] = [
      ['?filter=Nope%20%3D%201', 'Invalid Filter', 'Nope'],
      ['?filter=Name%20~%20%22x%22', 'Invalid Filter', 'form'],
      ['?filter=Name%20%3D%20x', 'Invalid Filter', 'JSON'],
      ['?filter=IntegrityLevel%20%3D%20%22x%22', 'Invalid Filter', 'number'],
      ['?order=Secret', 'Invalid Order', 'Secret'],
      ['?order=Approvers', 'Invalid Order', 'Approvers'],
      ['?limit=-1', 'Invalid Limit', 'limit'],
      ['?limit=abc', 'Invalid Limit', 'limit'],
      ['?offset=1.5', 'Invalid Limit', 'offset'],
      ['?start=garbage', 'Invalid Cursor', 'start'],
      ['?limit=1&limit=2', 'Bad Request', 'limit'],
    ];
    for (const [q, code, word] of cases) {
      const res = await s.req({ method: 'GET', url: `/groups${q}` });
      expect(res.statusCode, q).toBe(400);
      expect(res.headers['x-error-code'], q).toBe(code);
      expect(res.json().Message, q).toContain(word);
    }
    // A cursor made for one order is refused for another.
    const { res } = await list('?limit=2&order=Name');
    const other = await s.req({
      method: 'GET',
      url: `/groups?limit=2&order=-Name&start=${res.headers['x-end-cursor']}`,
    });
    expect(other.statusCode).toBe(400);
    expect(other.headers['x-error-code']).toBe('Invalid Cursor');
  });
});
