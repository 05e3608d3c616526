import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventClient } from '../events/client.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';
import { account, signIn } from '../kit/index.js';
import { claim, world } from './fixture.js';

type Entry = Record<string, string | number>;

/** #16 item 6: the audit trail, its list options, its stream, and its agreement with the approvals report. */
describe.each(backends())('audit trail on %s', (backend) => {
  let s: TestService;
  let base: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => s?.close());

  const audit = async (query: string, key?: string) => {
    const r = await s.req({ method: 'GET', url: `/audit?${query}`, ...(key ? { key } : {}) });
    expect(r.statusCode, r.body).toBe(200);
    return { items: jsonLines(r.body).map((l) => l.Item as Entry), r };
  };
  const f = (expr: string) => `filter=${encodeURIComponent(expr)}`;

  it('records who wrote, by which credential, from where; reads are not recorded', async () => {
    const sync = await s.keyFor(['sync']);
    const created = await s.req({
      method: 'POST',
      url: '/users',
      key: sync,
      payload: {},
      headers: { 'user-agent': 'auditor-test/1' },
    });
    const userId = created.headers['x-id'] as string;
    await s.req({ method: 'GET', url: `/users/${userId}` });
    // A create names the object it made (its X-Id), so the trail can say "created user …".
    const { items } = await audit(
      `${f(`ObjectID = ${JSON.stringify(userId)}`)}&${f(`Kind = "User"`)}&order=-TimeMs&limit=5`,
    );
    const mine = items.find((e) => e.RequestID === created.headers['x-request-id']);
    expect(mine).toMatchObject({
      Method: 'POST',
      Route: '/users',
      Path: '/users',
      Kind: 'User',
      Status: 201,
      Via: 'apikey',
      UserAgent: 'auditor-test/1',
      Address: '127.0.0.1',
      ObjectID: userId,
      Rule: '',
    });
    expect(String(mine?.KeyID)).not.toBe('');
    const get = await audit(f(`ObjectID = ${JSON.stringify(userId)}`));
    expect(get.items.filter((e) => e.Method === 'GET')).toEqual([]);

    // A key in the query string is never written to the trail.
    const del = await s.req({
      method: 'DELETE',
      url: `/users/${userId}?access_token=${s.adminKey}`,
      key: '',
      headers: { 'if-match': '*' },
    });
    expect([204, 412]).toContain(del.statusCode);
    const after = await s.req({ method: 'GET', url: '/audit' });
    expect(after.body).not.toContain(s.adminKey);
    expect(
      jsonLines(after.body).some(
        (l) => (l.Item as Entry).Path === `/users/${userId}` && (l.Item as Entry).Method === 'DELETE',
      ),
    ).toBe(true);

    // Sessions and agents are named too.
    const a = await account(s, { tag: 'aud' });
    const b = await signIn(s, a, { password: true });
    expect((await b.post('/auth/location', { lat: '1', long: '2' })).statusCode).toBe(204);
    const sess = await audit(`${f('Route = "/auth/location"')}&${f(`UserID = ${JSON.stringify(a.id)}`)}`);
    expect(sess.items[0]).toMatchObject({ Via: 'session', UserID: a.id });
    expect(String(sess.items[0]?.SessionID)).not.toBe('');
    const w = await world(s);
    await claim(s, w.token, { Name: 'aud-agent' });
    const ag = await audit(
      `${f('Route = "/accountchanges/claim"')}&${f(`AgentAppID = ${JSON.stringify(w.appId)}`)}`,
    );
    expect(ag.items[0]).toMatchObject({ Via: 'agent', Status: 200 });
    // A refused agent (bad token) is recorded without an App.
    await s.req({
      method: 'POST',
      url: '/accountchanges/claim',
      key: '',
      headers: { authorization: `Bearer gp.${w.appId}.nope` },
      payload: {},
    });
    const refused = await audit(`${f('Route = "/accountchanges/claim"')}&${f('Status = 401')}`);
    expect(refused.items[0]).toMatchObject({ Via: 'none', AgentAppID: '' });
  });

  it('lists with the object list options, for admin and audit keys only', async () => {
    for (let i = 0; i < 7; i++)
      await s.req({ method: 'POST', url: '/groups', payload: { Name: `audit-page-${i}-${Date.now()}` } });
    const q = `${f('Route = "/groups"')}&${f('Method = "POST"')}&order=TimeMs&order=ID`;
    const all = (await audit(q)).items.map((e) => e.ID);
    expect(all.length).toBeGreaterThanOrEqual(7);
    const seen: unknown[] = [];
    let start = '';
    for (;;) {
      const page = await audit(`${q}&limit=3&start=${encodeURIComponent(start)}`, await s.keyFor(['audit']));
      if (page.items.length === 0) break;
      seen.push(...page.items.map((e) => e.ID));
      start = page.r.headers['x-end-cursor'] as string;
    }
    expect(seen).toEqual(all);
    expect((await s.req({ method: 'GET', url: '/audit', key: await s.keyFor(['sync']) })).statusCode).toBe(
      403,
    );
    expect((await s.req({ method: 'GET', url: '/audit', key: '' })).statusCode).toBe(401);
    expect((await s.req({ method: 'GET', url: `/audit?${f('Nope = 1')}` })).statusCode).toBe(400);
    expect((await s.req({ method: 'POST', url: '/audit', payload: {} })).statusCode).toBe(404);
  });

  it('agrees with the approvals report', async () => {
    const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: `approved-${Date.now()}` } });
    const groupId = g.headers['x-id'] as string;
    const u = await s.req({ method: 'POST', url: '/users', payload: {} });
    const userId = u.headers['x-id'] as string;
    const approve = await s.req({
      method: 'POST',
      url: `/groups/${groupId}/members/${userId}/approve`,
      payload: {},
    });
    expect(approve.statusCode).toBeLessThan(300);
    const csv = (await s.req({ method: 'GET', url: '/groups/report.csv' })).body.split('\n');
    const header = (csv[0] as string).split(',');
    const row = csv
      .map((l) => l.split(','))
      .find((c) => c[header.indexOf('group_id')] === groupId && c[header.indexOf('user_id')] === userId);
    expect(row).toBeDefined();
    const entry = (
      await audit(`${f(`Path = ${JSON.stringify(`/groups/${groupId}/members/${userId}/approve`)}`)}`)
    ).items[0];
    expect(entry?.UserID).toBe(row?.[header.indexOf('approver_user_id')]);
    const reportTime = Date.parse(String(row?.[header.indexOf('approved_time')]));
    expect(Math.abs(reportTime - Date.parse(String(entry?.Time)))).toBeLessThanOrEqual(1000);
  });

  it('streams the trail as kind AuditEntry to admin and audit credentials', async () => {
    const c = await EventClient.open(base, await s.keyFor(['audit']));
    try {
      c.send({ Kind: 'AuditEntry' });
      const before = await c.caughtUp('AuditEntry');
      expect(before.length).toBeGreaterThan(0);
      const r = await s.req({ method: 'POST', url: '/users', payload: {} });
      await c.until(
        (x) => x.frames.some((fr) => (fr.Item as Entry).RequestID === r.headers['x-request-id']),
        5000,
        'the new entry',
      );
    } finally {
      c.close();
    }
    const u = await EventClient.open(base, await s.keyFor(['sync']));
    try {
      u.send({ Kind: 'AuditEntry' });
      await u.until((x) => x.frames.some((fr) => fr.StatusCode === 403), 5000, 'a 403 frame');
    } finally {
      u.close();
    }
  });
});
