import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putReference, send, webm } from '../auth/factors/vouch/kit.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, Browser, freshIp, signIn } from '../kit/index.js';

/**
 * The side doors of #23, each tried as the attacker ran it from outside, through HTTP only: an
 * ordinary group approver or a sync key working their way to power over an administrator.
 * Every one must be refused by the decision point (src/policy), naming its rule in the audit trail.
 */
describe.each(backends())(
  'the decision point refuses the #23 findings on %s',
  { timeout: 180_000 },
  (backend) => {
    let s: TestService;
    let syncKey: string;
    beforeAll(async () => {
      s = await startTestService(backend);
      const k = await s.req({ method: 'POST', url: '/apikeys', payload: { Scopes: ['sync'] } });
      syncKey = String(k.json().Secret);
    });
    afterAll(async () => s?.close());

    const group = async (payload: Record<string, unknown>) => {
      const g = await s.req({
        method: 'POST',
        url: '/groups',
        payload: { Name: `g-${freshIp()}`, ...payload },
      });
      expect(g.statusCode, g.body).toBe(201);
      return String(g.headers['x-id']);
    };
    const admin = async () => {
      const a = await account(s, { totp: true, admin: true, tag: 'adm' });
      expect((await putReference(s, a.id, webm(200_000))).statusCode).toBe(204);
      return a;
    };
    const lastRule = async () => {
      const audit = await s.req({ url: '/audit?order=-TimeMs&limit=1' });
      expect(audit.statusCode, audit.body).toBe(200);
      return JSON.parse(audit.body.split('\n')[0] as string).Item as Record<string, unknown>;
    };

    it('1: an approver cannot add an administrator to her group, nor vouch for one who is in it', async () => {
      const attacker = await account(s, { totp: true, tag: 'att' });
      const target = await admin();
      const g = await group({ RequiresApproval: true, Approvers: [attacker.id] });
      const her = await signIn(s, attacker, { password: true, totp: true }, { level: 3 });
      const add = await her.post(`/groups/${g}/members/${target.id}`, {});
      expect(add.statusCode, add.body).toBe(403);
      expect((await lastRule()).Rule).toBe('privilege.ceiling');
      expect((await s.req({ url: `/groups/${g}/members/${target.id}` })).statusCode).toBe(404);

      // The administrator joined the group some other way (an admin added him): still no vouching.
      expect((await s.req({ method: 'POST', url: `/groups/${g}/members/${target.id}` })).statusCode).toBe(
        201,
      );
      const fresh = new Browser(s, { ip: freshIp() });
      expect((await fresh.post('/auth/email', { email: target.email })).statusCode).toBe(204);
      const named = await fresh.post('/auth/vouch', { voucher: attacker.email });
      expect(named.statusCode, named.body).toBe(403);
      const anyone = await fresh.post('/auth/vouch', {});
      if (anyone.statusCode === 200) {
        const v = anyone.json();
        expect(v.Vouchers ?? []).not.toContainEqual(expect.objectContaining({ ID: attacker.id }));
        expect((await send(fresh, 'POST', `/auth/vouch/${v.ID}/video`, webm())).statusCode).toBe(204);
        const approve = await her.post(`/auth/vouch/${v.ID}/approve`, { video: 'x' });
        expect([403, 404]).toContain(approve.statusCode);
      } else expect([403, 409], anyone.body).toContain(anyone.statusCode);
      expect((await fresh.req({ url: '/tenant' })).statusCode).not.toBe(200);
    });

    it('2: a sync key cannot name approvers of, or add members to, a group an administrator is in', async () => {
      const attacker = await account(s, { totp: true, tag: 'att' });
      const target = await admin();
      const g = await group({ RequiresApproval: true });
      expect((await s.req({ method: 'POST', url: `/groups/${g}/members/${target.id}` })).statusCode).toBe(
        201,
      );
      const before = await s.req({ url: `/groups/${g}` });
      const put = await s.req({
        method: 'PUT',
        url: `/groups/${g}`,
        key: syncKey,
        headers: { 'if-match': String(before.headers.etag) },
        payload: { ...(before.json() as Record<string, unknown>), Approvers: [attacker.id] },
      });
      expect(put.statusCode, put.body).toBe(403);
      expect((await s.req({ url: `/groups/${g}` })).headers.etag).toBe(before.headers.etag);
      const patch = await s.req({
        method: 'PATCH',
        url: `/groups/${g}`,
        key: syncKey,
        headers: { 'if-match': String(before.headers.etag), 'content-type': 'application/merge-patch+json' },
        payload: { ApproverGroup: '', Approvers: [attacker.id] },
      });
      expect(patch.statusCode, patch.body).toBe(403);
      const join = await s.req({ method: 'POST', url: `/groups/${g}/members/${attacker.id}`, key: syncKey });
      expect(join.statusCode, join.body).toBe(403);
      // A group with no administrator in it stays the sync key's to manage.
      const plain = await group({ RequiresApproval: true });
      expect(
        (await s.req({ method: 'POST', url: `/groups/${plain}/members/${attacker.id}`, key: syncKey }))
          .statusCode,
      ).toBe(201);
    });

    it('2b: nor through an approver group: members of a group that approves the admin’s group hold power over him', async () => {
      const attacker = await account(s, { tag: 'att' });
      const target = await admin();
      const approvers = await group({ RequiresApproval: true });
      const g = await group({ RequiresApproval: true, ApproverGroup: approvers });
      expect((await s.req({ method: 'POST', url: `/groups/${g}/members/${target.id}` })).statusCode).toBe(
        201,
      );
      const join = await s.req({
        method: 'POST',
        url: `/groups/${approvers}/members/${attacker.id}`,
        key: syncKey,
      });
      expect(join.statusCode, join.body).toBe(403);
    });

    it('6: a sync key cannot disable a user who owns an admin-scope key (the key keeps working)', async () => {
      const owner = await account(s, { tag: 'own' });
      const k = await s.req({
        method: 'POST',
        url: '/apikeys',
        payload: { Scopes: ['admin'], UserID: owner.id },
      });
      const ownerKey = String(k.json().Secret);
      const r = await s.req({ method: 'POST', url: `/users/${owner.id}/disable`, key: syncKey, payload: {} });
      expect(r.statusCode, r.body).toBe(403);
      expect((await lastRule()).Rule).toBe('privilege.ceiling');
      expect((await s.req({ url: '/tenant', key: ownerKey })).statusCode).toBe(200);
    });

    it("8: a sync key cannot plan changes to an administrator's accounts", async () => {
      const target = await admin();
      const app = await s.req({ method: 'POST', url: '/apps', payload: { Name: `app-${freshIp()}` } });
      const appId = String(app.headers['x-id']);
      const del = await s.req({
        method: 'POST',
        url: '/accountchanges',
        key: syncKey,
        payload: { UserID: target.id, AppID: appId, Action: 'delete', AccountName: 'root' },
      });
      expect(del.statusCode, del.body).toBe(403);
      const plan = await s.req({
        method: 'POST',
        url: `/users/${target.id}/accounts/suggest`,
        key: syncKey,
        payload: { Plan: { Name: 'take over' } },
      });
      expect(plan.statusCode, plan.body).toBe(403);
      const ordinary = await account(s, { tag: 'ord' });
      const ok = await s.req({
        method: 'POST',
        url: '/accountchanges',
        key: syncKey,
        payload: { UserID: ordinary.id, AppID: appId, Action: 'create', AccountName: `ord-${freshIp()}` },
      });
      expect(ok.statusCode, ok.body).toBe(201);
    });
  },
);
