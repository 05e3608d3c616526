import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, authResponse, signIn } from '../kit/index.js';
import { create, op } from './fixture.js';

/**
 * A group's location requirement (Group.LocationRegions; docs/signin.md, "Location policy"): a
 * membership counts in the proxy's access check, and for an App's AccessGroups, only for a session
 * whose reported location is inside one of the group's regions, on top of the group's
 * IntegrityLevel. No location known counts as outside.
 */
const OFFICE = 'Amsterdam office: 52.3676,4.9041,25';
const HAARLEM = { lat: '52.3874', long: '4.6462' };
const UTRECHT = { lat: '52.0907', long: '5.1214' };

describe.each(backends())('group location requirement on %s', (backend) => {
  let s: TestService;
  let token: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    const appId = await create(s, 'apps', { Name: 'reports' });
    const tok = await s.req({ method: 'POST', url: `/apps/${appId}/proxytoken` });
    expect(tok.statusCode, tok.body).toBe(201);
    token = tok.json().Token as string;
  });
  afterAll(async () => s?.close());

  const check = async (userId: string, groups: string[], sessionId: string) => {
    const r = await s.req({
      method: 'POST',
      url: '/proxy/v1/accesscheck',
      key: '',
      headers: { authorization: `Bearer ${token}` },
      payload: { UserID: userId, Groups: groups, Op: 'and', Next: '', SessionID: sessionId },
    });
    expect(r.statusCode, r.body).toBe(200);
    return (r.json() as { Results: { GroupID: string; StatusCode: number }[] }).Results.map(
      (x) => x.StatusCode,
    );
  };

  it('counts the membership only from inside a region, at the group level', async () => {
    const office = await create(s, 'groups', {
      Name: 'office',
      IntegrityLevel: 2,
      LocationRegions: [OFFICE],
    });
    const anywhere = await create(s, 'groups', { Name: 'anywhere', IntegrityLevel: 2 });
    const a = await account(s, { tag: 'grploc' });
    for (const g of [office, anywhere]) expect((await op(s, 'add', g, a.id)).statusCode).toBeLessThan(300);
    const b = await signIn(s, a, { password: true });
    const sid = String((await authResponse(b)).SessionID);
    // No location reported: outside.
    expect(await check(a.id, [office, anywhere], sid)).toEqual([403, 200]);
    expect((await b.post('/auth/location', HAARLEM)).statusCode).toBe(204);
    expect(await check(a.id, [office, anywhere], sid)).toEqual([200, 200]);
    expect((await b.post('/auth/location', UTRECHT)).statusCode).toBe(204);
    expect(await check(a.id, [office, anywhere], sid)).toEqual([403, 200]);
    // Without a session (no location, level 0) the located group never counts.
    expect(await check(a.id, [office], '')).toEqual([403]);
  });

  it('refuses malformed regions (400)', async () => {
    const r = await s.req({
      method: 'POST',
      url: '/groups',
      payload: { Name: 'bad', LocationRegions: ['here'] },
    });
    expect(r.statusCode).toBe(400);
    expect(r.headers['x-error-code']).toBe('Invalid Field');
  });
});
