/**
 * Regression: the object API against injection and credential games. List filters and orders
 * are parsed against the type's declared fields and bound as parameters (src/store/listquery.ts):
 * whatever the text, the answer is a 400 or the right list, never a 500, on both backends, and the
 * database is intact afterwards. Credentials come from one place per request (header, else one
 * access_token in the query); If-Match games never get around authorization or strong comparison.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';

const NAMES = ["o'brien", 'alpha', 'x" OR "1"="1', '%', '_', 'ünïcödé ✓', 'back\\slash', 'tab\there'];

describe.each(backends())('API regressions on %s', (backend) => {
  let s: TestService;
  let userId = '';
  let userKey = '';
  const groups: Record<string, string> = {};

  beforeAll(async () => {
    s = await startTestService(backend);
    for (const name of NAMES) {
      const r = await s.req({ method: 'POST', url: '/groups', payload: { Name: name, Description: name } });
      expect(r.statusCode, r.body).toBe(201);
      groups[name] = r.headers['x-id'] as string;
    }
    const u = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: 'plain@example.com', Active: true },
    });
    userId = u.headers['x-id'] as string;
    userKey = await s.keyFor(['user'], userId);
  });
  afterAll(async () => s?.close());

  const list = (query: string) => s.req({ url: `/groups?${query}` });
  const names = (body: string) => jsonLines(body).map((l) => (l.Item as { Name: string }).Name);

  /** Every group is still there and the store still takes writes. */
  async function intact() {
    const all = await list('order=Name&limit=1000');
    expect(all.statusCode).toBe(200);
    expect(names(all.body).sort()).toEqual([...NAMES].sort());
    const probe = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: `probe${Date.now()}${Math.random()}@example.com` },
    });
    expect(probe.statusCode).toBe(201);
    expect(
      (
        await s.req({
          method: 'DELETE',
          url: `/users/${probe.headers['x-id']}`,
          headers: { 'if-match': String(probe.headers.etag) },
        })
      ).statusCode,
    ).toBe(204);
  }

  it('SQL in filter values is data: an equality filter returns exactly the objects with that value', async () => {
    const value = fc.oneof(
      fc.constantFrom(...NAMES),
      fc.constantFrom(
        "x' OR '1'='1",
        "'; DROP TABLE objects; --",
        '" OR 1=1 --',
        '\\',
        '\ud800',
        '%%',
        "' UNION SELECT * FROM objects --",
      ),
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({
        unit: fc.constantFrom("'", '"', '\\', ';', '-', '%', '_', '*', '(', ')', 'a', ' ', '\u0001'),
        maxLength: 30,
      }),
    );
    await fc.assert(
      fc.asyncProperty(value, fc.constantFrom('Name', 'Description'), async (v, field) => {
        const r = await list(`filter=${encodeURIComponent(`${field} = ${JSON.stringify(v)}`)}`);
        // NUL and unpaired surrogates (which a UTF-8 round trip does not keep) are refused on
        // every backend, in filters as in bodies: test/security/nul.test.ts.
        if (v.includes('\u0000') || Buffer.from(v, 'utf8').toString('utf8') !== v) {
          expect([r.statusCode, r.headers['x-error-code']]).toEqual([400, 'Invalid Filter']);
          return;
        }
        expect(r.statusCode, r.body).toBe(200);
        expect(names(r.body)).toEqual(NAMES.filter((n) => n === v));
      }),
      { numRuns: 80 },
    );
    await intact();
  });

  it('any text in filter and order is a 400 or a list, never a server error, and leaves the data intact', async () => {
    const fieldName = fc.oneof(
      fc.constantFrom(
        'Name',
        'Na"me',
        "Name'",
        'Name;',
        'Name--',
        'ID',
        'Nämé',
        'Name.Sub',
        'name',
        'NAME',
        '"Name"',
        '`Name`',
        '[Name]',
        'Name)',
        'data',
        'objects',
      ),
      fc.string({ maxLength: 20 }),
    );
    const raw = fc.oneof(
      fc
        .tuple(
          fieldName,
          fc.constantFrom('=', '<', '>=', '==', '!=', ' LIKE ', ' = ', ''),
          fc.oneof(fc.json({ maxDepth: 3 }), fc.string({ maxLength: 30 })),
        )
        .map(([f, op, v]) => `filter=${encodeURIComponent(`${f}${op}${v}`)}`),
      fieldName.map((f) => `order=${encodeURIComponent(f)}`),
      fc.constantFrom(
        `order=${encodeURIComponent('Name;DROP TABLE objects')}`,
        `order=${encodeURIComponent('-Name; DELETE FROM objects')}`,
        `order=${encodeURIComponent('Name DESC, (SELECT 1)')}`,
        `order=${encodeURIComponent('--Name')}`,
        `filter=${encodeURIComponent(`Name = ${'['.repeat(10_000)}${']'.repeat(10_000)}`)}`,
        `filter=${encodeURIComponent(`Name = ${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}`)}`,
        `filter=${encodeURIComponent(`Name = "${'x'.repeat(60_000)}"`)}`,
        `filter=${encodeURIComponent(`${'A'.repeat(5000)} = "x"`)}`,
        `filter=${encodeURIComponent('IntegrityLevel = 1e400')}`,
        `filter=${encodeURIComponent('IntegrityLevel = -1e400')}`,
        `filter=${encodeURIComponent('IntegrityLevel = 99999999999999999999999')}`,
        `filter=${encodeURIComponent('IntegrityLevel = "1 OR 1=1"')}`,
        `filter=${encodeURIComponent('RequiresApproval = "true\' OR 1=1"')}`,
        `filter=${encodeURIComponent('Name = "x"')}&filter=${encodeURIComponent('Name = "\' OR 1=1 --"')}`,
      ),
    );
    await fc.assert(
      fc.asyncProperty(raw, async (q) => {
        const r = await list(q);
        expect([q.slice(0, 200), r.statusCode]).toEqual([q.slice(0, 200), r.statusCode === 200 ? 200 : 400]);
        if (r.statusCode === 400)
          expect(['Invalid Filter', 'Invalid Order', 'Bad Request']).toContain(r.headers['x-error-code']);
        else for (const n of names(r.body)) expect(NAMES).toContain(n);
      }),
      { numRuns: 150 },
    );
    await intact();
  });

  it('access_token counts once, in the query only, and never beside or above the Authorization header', async () => {
    const admin = s.adminKey;
    const as = (url: string, key: string, init: { method?: 'GET' | 'POST'; payload?: object } = {}) =>
      s.req({ url, key, ...init });
    // Twice (same or other value, or an empty second) is refused rather than guessed between.
    for (const q of [
      `access_token=${admin}&access_token=${admin}`,
      `access_token=${userKey}&access_token=${admin}`,
      `access_token=${admin}&access_token=`,
    ])
      expect((await as(`/tenant?${q}`, '')).statusCode).toBe(401);
    // Other spellings are not the parameter.
    for (const q of [
      `ACCESS_TOKEN=${admin}`,
      `access_token[]=${admin}`,
      `access_token[0]=${admin}`,
      `access-token=${admin}`,
      `accesstoken=${admin}`,
    ])
      expect([q.replace(admin, 'K'), (await as(`/tenant?${q}`, '')).statusCode]).toEqual([
        q.replace(admin, 'K'),
        401,
      ]);
    // The header decides when both are sent: a user key with an admin access_token is the user.
    expect((await as(`/tenant?access_token=${admin}`, userKey)).statusCode).toBe(403);
    expect(
      (await s.req({ url: `/tenant?access_token=${admin}`, headers: { authorization: 'Bearer nope' } }))
        .statusCode,
    ).toBe(401);
    // In a body it is not a credential at all, alone or next to a weaker one in the query.
    const body = { Name: 'made-by-body-token', access_token: admin };
    expect((await as('/groups', '', { method: 'POST', payload: body })).statusCode).toBe(401);
    expect(
      (await as(`/groups?access_token=${userKey}`, '', { method: 'POST', payload: body })).statusCode,
    ).toBe(403);
    expect(names((await list('filter=Name%20%3D%20%22made-by-body-token%22')).body)).toEqual([]);
  });

  // Was open until 860fe00 (redaction matched the raw text; "access%5Ftoken" authenticates yet
  // was logged in clear). Near-miss spellings a client may use by mistake count too.
  it('a key in the query string never reaches the log, however the parameter is spelled', async () => {
    const key = await s.keyFor(['user'], userId);
    for (const name of [
      'access_token',
      'ACCESS_TOKEN',
      'access%5Ftoken',
      '%61ccess_token',
      'access_token[]',
      'access-token',
      'accesstoken',
    ])
      await s.req({ url: `/users/me?${name}=${key}`, key: '' });
    await s.req({ url: `/users/me?x=1&access_token=${encodeURIComponent(key)}%20`, key: '' });
    expect(s.logs.join('\n')).not.toContain(key);
  });

  // Was open on PostgreSQL: a NUL character in any string the API stores or compares (an object
  // field, a filter value, a cursor, an ID in the path) reached the driver, which refused it, and
  // the API answered 500. The service now refuses it at the input boundary on every backend
  // (src/core/text.ts); test/security/nul.test.ts generates the variants.
  it('a NUL in a stored or compared string is a 400 or works, never a 500', async () => {
    const cursor = Buffer.from(JSON.stringify(['Name,ID', true, ['\u0000', 'x']])).toString('base64url');
    const requests = [
      () => s.req({ method: 'POST', url: '/groups', payload: { Name: 'nul\u0000name' } }),
      () =>
        s.req({
          method: 'POST',
          url: '/groups',
          payload: { Name: 'nul-description', Description: '\u0000' },
        }),
      () => list(`filter=${encodeURIComponent('Name = "\\u0000"')}`),
      () => list(`filter=${encodeURIComponent('ID >= "a\\u0000"')}`),
      () => list(`order=Name&start=${cursor}`),
      () => s.req({ url: `/groups/${encodeURIComponent('a\u0000b')}` }),
    ];
    for (const [i, send] of requests.entries()) {
      const r = await send();
      expect([i, r.statusCode < 500]).toEqual([i, true]);
    }
  });

  it('If-Match games (*, weak tags, lists) on privileged objects never get around authorization or strong comparison', async () => {
    const tenant = await s.req({ url: '/tenant' });
    const etag = tenant.headers.etag as string;
    const change = { ...tenant.json(), Name: 'taken over' };
    const variants = fc.constantFrom('*', ' * ', etag, `W/${etag}`, `"x", ${etag}`, `${etag}, *`, `W/*`);
    await fc.assert(
      fc.asyncProperty(variants, async (im) => {
        // A user key may not update the tenant or another user, whatever it claims to have seen.
        const t = await s.req({
          method: 'PUT',
          url: '/tenant',
          key: userKey,
          headers: { 'if-match': im },
          payload: change,
        });
        expect(t.statusCode).toBe(403);
        const other = await s.req({
          method: 'PUT',
          url: `/users/${s.adminId}`,
          key: userKey,
          headers: { 'if-match': im },
          payload: { Email: 'x@evil.example' },
        });
        expect(other.statusCode).toBe(403);
        const del = await s.req({
          method: 'DELETE',
          url: `/users/${s.adminId}`,
          key: userKey,
          headers: { 'if-match': im },
        });
        expect(del.statusCode).toBe(403);
      }),
    );
    // Weak tags never match (If-Match compares strongly), alone or in a list.
    for (const im of [
      `W/${etag}`,
      `"bogus", W/${etag}`,
      etag.toLowerCase() === etag ? `"${etag.slice(1, -1).toUpperCase()}"` : etag.toLowerCase(),
    ]) {
      const r = await s.req({ method: 'PUT', url: '/tenant', headers: { 'if-match': im }, payload: change });
      expect([im, r.statusCode]).toEqual([im, 412]);
    }
    // "*" never creates what does not exist; no If-Match at all is 428.
    expect(
      (
        await s.req({
          method: 'PUT',
          url: '/groups/nosuchgroup',
          headers: { 'if-match': '*' },
          payload: { Name: 'n' },
        })
      ).statusCode,
    ).toBe(404);
    expect((await s.req({ method: 'PUT', url: '/tenant', payload: change })).statusCode).toBe(428);
    expect(
      (await s.req({ method: 'PUT', url: '/tenant', headers: { 'if-match': ' ' }, payload: change }))
        .statusCode,
    ).toBe(428);
    const after = await s.req({ url: '/tenant' });
    expect(after.json().Name).toBe(tenant.json().Name);
    expect(after.headers.etag).toBe(etag);
    expect((await s.req({ url: `/users/${s.adminId}` })).json().Email).not.toBe('x@evil.example');
  });
});
