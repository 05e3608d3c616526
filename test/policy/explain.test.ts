import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account } from '../kit/index.js';

/** GET /policy/explain and /policy/actions (admin only), and refusals in the audit trail with their rule. */
describe.each(backends())('asking the policy why on %s', { timeout: 120_000 }, (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('explains a refusal with the chain of rules, and an allowance', async () => {
    const k = await s.req({ method: 'POST', url: '/apikeys', payload: { Scopes: ['sync'] } });
    const syncKeyId = String(k.headers['x-id']);
    const ordinary = await account(s, { tag: 'ord' });
    const why = await s.req({
      url: `/policy/explain?actor=${syncKeyId}&action=User.disable&kind=User&id=${s.adminId}`,
    });
    expect(why.statusCode, why.body).toBe(200);
    const d = why.json();
    expect(d).toMatchObject({ Allowed: false, Rule: 'privilege.ceiling', Action: 'User.disable' });
    expect(d.Chain.map((c: { Rule: string; Allowed: boolean }) => [c.Rule, c.Allowed])).toEqual([
      ['grant.scope', true],
      ['privilege.ceiling', false],
    ]);
    expect(d.Reason).toContain('admin');
    const ok = await s.req({
      url: `/policy/explain?actor=${syncKeyId}&action=User.disable&kind=User&id=${ordinary.id}`,
    });
    expect(ok.json()).toMatchObject({ Allowed: true });
    // A user as actor: an ordinary user may not change the tenant.
    const tenant = await s.req({ url: `/policy/explain?actor=${ordinary.id}&action=Tenant.update` });
    expect(tenant.json()).toMatchObject({ Allowed: false, Rule: 'grant.scope' });
    expect((await s.req({ url: '/policy/explain?actor=x&action=No.such' })).statusCode).toBe(400);
    expect((await s.req({ url: '/policy/explain' })).statusCode).toBe(400);
  });

  it('is for administrators only', async () => {
    const sync = await s.keyFor(['sync', 'audit']);
    const r = await s.req({ url: `/policy/explain?actor=${s.adminId}&action=User.update`, key: sync });
    expect(r.statusCode).toBe(403);
    expect((await s.req({ url: '/policy/actions', key: sync })).statusCode).toBe(403);
    const list = await s.req({ url: '/policy/actions' });
    expect(list.statusCode).toBe(200);
    const names = list.json().map((a: { Action: string }) => a.Action);
    expect(names).toEqual(
      expect.arrayContaining(['User.update', 'User.disable', 'Membership.add', 'VouchRequest.approve']),
    );
  });

  it('records refused reads and writes in the audit trail with the rule that refused them', async () => {
    const user = await s.keyFor(['user']);
    const read = await s.req({ url: '/apps', key: user });
    expect(read.statusCode).toBe(403);
    const q = encodeURIComponent(`RequestID = ${JSON.stringify(read.headers['x-request-id'])}`);
    const entry = (await s.req({ url: `/audit?filter=${q}` })).body.trim();
    expect(JSON.parse(entry).Item).toMatchObject({ Method: 'GET', Status: 403, Rule: 'grant.scope' });
  });
});
