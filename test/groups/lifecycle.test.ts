import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';
import { create, op, person } from './fixture.js';

describe.each(backends())('group membership lifecycle on %s', (backend) => {
  let s: TestService;
  let approver: Awaited<ReturnType<typeof person>>;
  let alice: Awaited<ReturnType<typeof person>>;
  let bob: Awaited<ReturnType<typeof person>>;
  let syncKey: string;
  let auditKey: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    approver = await person(s, 'Approver');
    alice = await person(s, 'Alice');
    bob = await person(s, 'Bob');
    syncKey = await s.keyFor(['sync']);
    auditKey = await s.keyFor(['audit']);
  });
  afterAll(async () => s?.close());

  it('walks request, approve, activate, use, reject and unreject with their status codes', async () => {
    const g = await create(s, 'groups', {
      Name: 'prod-db',
      RequiresApproval: true,
      RequiresActivation: true,
      Approvers: [approver.id],
    });
    // Alice asks to join (her own user key): a new membership in state requested.
    const req = await op(s, 'add', g, alice.id, { key: alice.key, reason: 'on call this week' });
    expect(req.statusCode, req.body).toBe(201);
    expect(req.headers['content-type']).toMatch(/^application\/json/);
    expect(req.headers.location).toBe(`/memberships/${g}.${alice.id}`);
    expect(req.headers.etag).toMatch(/^".+"$/);
    const m1 = req.json();
    expect(m1).toMatchObject({
      ID: `${g}.${alice.id}`,
      GroupID: g,
      UserID: alice.id,
      State: 'requested',
      Reason: 'on call this week',
      LastChange: {
        Op: 'request',
        FromState: 'none',
        ByUserID: alice.id,
        Via: 'apikey',
        Reason: 'on call this week',
      },
    });
    expect(m1.RequestTime).not.toBe('0001-01-01T00:00:00Z');
    // She cannot approve or activate herself.
    expect((await op(s, 'approve', g, alice.id, { key: alice.key })).statusCode).toBe(403);
    const early = await op(s, 'activate', g, alice.id, { key: alice.key });
    expect(early.statusCode).toBe(409);
    expect(early.headers['x-error-code']).toBe('Invalid Transition');
    expect(early.headers['x-membership-state']).toBe('requested');
    expect(early.json().Message).toContain('requested');
    // The approver approves, with a reason (form-encoded this time).
    const ap = await op(s, 'approve', g, alice.id, {
      key: approver.key,
      reason: 'ok, ticket 42',
      form: true,
    });
    expect(ap.statusCode, ap.body).toBe(200);
    expect(ap.json()).toMatchObject({
      State: 'approved',
      Approval: { ByUserID: approver.id, Reason: 'ok, ticket 42' },
      LastChange: { Op: 'approve', FromState: 'requested', ByUserID: approver.id },
    });
    // Approving again changes nothing (200, same version: the first approval stays on record).
    const again = await op(s, 'approve', g, alice.id, { key: s.adminKey, reason: 'me too' });
    expect(again.statusCode).toBe(200);
    expect(again.headers.etag).toBe(ap.headers.etag);
    expect(again.json().Approval.ByUserID).toBe(approver.id);
    // Use before activation: 409.
    expect((await op(s, 'use', g, alice.id, { key: syncKey })).statusCode).toBe(409);
    // The approver may not activate for her; she does it herself.
    expect((await op(s, 'activate', g, alice.id, { key: approver.key })).statusCode).toBe(403);
    const act = await op(s, 'activate', g, alice.id, { key: alice.key });
    expect(act.statusCode, act.body).toBe(200);
    expect(act.json().State).toBe('active');
    expect(act.json().ActivateTime).not.toBe('0001-01-01T00:00:00Z');
    // Use: by the proxy's sync key; members cannot record their own use.
    expect((await op(s, 'use', g, alice.id, { key: alice.key })).statusCode).toBe(403);
    const use = await op(s, 'use', g, alice.id, { key: syncKey });
    expect(use.statusCode).toBe(200);
    expect(use.json().LastUsed).not.toBe('0001-01-01T00:00:00Z');
    // Reject (revoke) with a reason; access is gone.
    const rej = await op(s, 'reject', g, alice.id, { key: approver.key, reason: 'left the team' });
    expect(rej.statusCode).toBe(200);
    expect(rej.json()).toMatchObject({
      State: 'rejected',
      Rejection: { ByUserID: approver.id, Reason: 'left the team' },
      Approval: { ByUserID: '', Time: '0001-01-01T00:00:00Z' },
    });
    // Rejected: she cannot ask again, nor erase the rejection by leaving.
    expect((await op(s, 'add', g, alice.id, { key: alice.key })).statusCode).toBe(409);
    const leave = await op(s, 'remove', g, alice.id, { key: alice.key });
    expect(leave.statusCode).toBe(409);
    expect(leave.headers['x-membership-state']).toBe('rejected');
    expect((await op(s, 'unreject', g, alice.id, { key: alice.key })).statusCode).toBe(403);
    // A standing rejection blocks approval and activation too.
    const blocked = await op(s, 'approve', g, alice.id, { key: approver.key });
    expect(blocked.statusCode).toBe(409);
    expect(blocked.headers['x-membership-state']).toBe('rejected');
    expect(blocked.json().Message).toContain('rejected');
    expect((await op(s, 'activate', g, alice.id, { key: alice.key })).statusCode).toBe(409);
    expect((await op(s, 'use', g, alice.id)).statusCode).toBe(409);
    // Unreject deletes the rejection: back to requested, and she can be approved again.
    const un = await op(s, 'unreject', g, alice.id, { key: approver.key, reason: 'mistake' });
    expect(un.statusCode).toBe(200);
    expect(un.json()).toMatchObject({
      State: 'requested',
      Rejection: { ByUserID: '', Time: '0001-01-01T00:00:00Z', Reason: '' },
      LastChange: { Op: 'unreject', FromState: 'rejected', Reason: 'mistake' },
    });
    expect((await op(s, 'unreject', g, alice.id, { key: approver.key })).statusCode).toBe(409);
    expect((await op(s, 'approve', g, alice.id, { key: approver.key })).json().State).toBe('approved');
    // Remove: 204, then the membership is gone (404), and removing again is 404 too.
    const del = await op(s, 'remove', g, alice.id, { key: approver.key, reason: 'cleanup' });
    expect(del.statusCode).toBe(204);
    expect((await s.req({ method: 'GET', url: `/groups/${g}/members/${alice.id}` })).statusCode).toBe(404);
    expect((await s.req({ method: 'GET', url: `/memberships/${g}.${alice.id}` })).statusCode).toBe(404);
    const del2 = await op(s, 'remove', g, alice.id, { key: approver.key });
    expect(del2.statusCode).toBe(409);
    expect(del2.headers['x-membership-state']).toBe('none');
    // The history keeps every version, with who, when and why, including the removal.
    const hist = await s.req({ method: 'GET', url: `/groups/${g}/members/${alice.id}/history` });
    expect(hist.statusCode).toBe(200);
    const versions = jsonLines(hist.body).map((l) => l.Item as Record<string, unknown>);
    const ops = versions.map((v) => (v.LastChange as { Op?: string } | undefined)?.Op ?? 'deleted');
    expect(ops).toEqual([
      'request',
      'approve',
      'activate',
      'use',
      'reject',
      'unreject',
      'approve',
      'remove',
      'deleted',
    ]);
    // The history is readable by the member and the group's approvers, not by other users.
    const hurl = `/groups/${g}/members/${alice.id}/history`;
    expect((await s.req({ method: 'GET', url: hurl, key: alice.key })).statusCode).toBe(200);
    expect((await s.req({ method: 'GET', url: hurl, key: approver.key })).statusCode).toBe(200);
    expect((await s.req({ method: 'GET', url: hurl, key: bob.key })).statusCode).toBe(403);
    expect(
      (await s.req({ method: 'GET', url: `/groups/${g}/members/${alice.id}`, key: bob.key })).statusCode,
    ).toBe(403);
    const removal = versions[7] as { State: string; LastChange: Record<string, string> };
    expect(removal.State).toBe('removed');
    expect(removal.LastChange).toMatchObject({
      ByUserID: approver.id,
      Reason: 'cleanup',
      FromState: 'approved',
    });
  });

  it('adds at once when the group needs neither approval nor activation', async () => {
    const open = await create(s, 'groups', { Name: 'open' });
    const self = await op(s, 'add', open, bob.id, { key: bob.key });
    expect(self.statusCode).toBe(201);
    expect(self.json()).toMatchObject({ State: 'active', LastChange: { Op: 'request' } });
    // Added by an admin: active at once too, and the admin's decision is recorded as the approval.
    const byAdmin = await op(s, 'add', open, alice.id, { reason: 'team' });
    expect(byAdmin.statusCode).toBe(201);
    expect(byAdmin.json()).toMatchObject({
      State: 'active',
      Reason: 'team',
      Approval: { ByUserID: s.adminId },
    });
    // Adding an active member again changes nothing (a sync can repeat itself).
    const dup = await op(s, 'add', open, alice.id);
    expect(dup.statusCode).toBe(200);
    expect(dup.headers.etag).toBe(byAdmin.headers.etag);
    // Bob joined by himself: no approval yet. An admin's approve records one, state unchanged.
    const approved = await op(s, 'approve', open, bob.id, { reason: 'vetted' });
    expect(approved.statusCode).toBe(200);
    expect(approved.json()).toMatchObject({
      State: 'active',
      Approval: { ByUserID: s.adminId, Reason: 'vetted' },
    });
    // Activating an active membership changes nothing either.
    const act = await op(s, 'activate', open, bob.id, { key: bob.key });
    expect(act.statusCode).toBe(200);
    expect(act.headers.etag).toBe(approved.headers.etag);
    // A member may leave.
    expect((await op(s, 'remove', open, bob.id, { key: bob.key })).statusCode).toBe(204);
    // A decider may approve someone who never asked: that creates the membership (201).
    const pre = await op(s, 'approve', open, bob.id, { key: syncKey, reason: 'pre-approved' });
    expect(pre.statusCode).toBe(201);
    expect(pre.json()).toMatchObject({
      State: 'active',
      Reason: 'pre-approved',
      LastChange: { Op: 'approve', FromState: 'none' },
    });
  });

  it('lets a decider add to an approval group: approved, then the member activates', async () => {
    const g = await create(s, 'groups', {
      Name: 'needs-activation',
      RequiresApproval: true,
      RequiresActivation: true,
    });
    const add = await op(s, 'add', g, bob.id, { key: syncKey, reason: 'HR sync' });
    expect(add.statusCode).toBe(201);
    expect(add.json()).toMatchObject({ State: 'approved', Approval: { ByUserID: '', Reason: 'HR sync' } });
    expect(add.json().Approval.ByKeyID).not.toBe('');
    // Only the member (or an admin) activates; sync cannot.
    expect((await op(s, 'activate', g, bob.id, { key: syncKey })).statusCode).toBe(403);
    expect((await op(s, 'activate', g, bob.id)).json().State).toBe('active');
  });

  it('gives approver rights to members of the ApproverGroup, but never over themselves', async () => {
    const leads = await create(s, 'groups', { Name: 'leads' });
    expect((await op(s, 'add', leads, bob.id)).json().State).toBe('active');
    const g = await create(s, 'groups', { Name: 'guarded', RequiresApproval: true, ApproverGroup: leads });
    expect((await op(s, 'add', g, alice.id, { key: alice.key })).json().State).toBe('requested');
    // Bob (a lead) asking for himself only requests: approvers do not approve themselves.
    expect((await op(s, 'add', g, bob.id, { key: bob.key })).json().State).toBe('requested');
    expect((await op(s, 'approve', g, bob.id, { key: bob.key })).statusCode).toBe(403);
    // He approves Alice, and can read the group's members.
    expect((await op(s, 'approve', g, alice.id, { key: bob.key })).json().State).toBe('active');
    const list = await s.req({ method: 'GET', url: `/groups/${g}/members`, key: bob.key });
    expect(list.statusCode).toBe(200);
    // Once Bob leaves the lead group, he is no approver any more.
    expect((await op(s, 'remove', leads, bob.id)).statusCode).toBe(204);
    expect((await op(s, 'reject', g, alice.id, { key: bob.key })).statusCode).toBe(403);
    expect((await s.req({ method: 'GET', url: `/groups/${g}/members`, key: bob.key })).statusCode).toBe(403);
  });

  it('answers 404 for an unknown group or user, and 403 for callers without rights', async () => {
    const g = await create(s, 'groups', { Name: 'g404', RequiresApproval: true });
    for (const action of ['add', 'remove', 'activate', 'approve', 'reject', 'unreject', 'use'] as const) {
      const noGroup = await op(s, action, 'nosuchgroup0000', alice.id);
      expect(noGroup.statusCode, `${action} unknown group`).toBe(404);
      expect(noGroup.headers['x-error-code']).toBe('Not Found');
      const noUser = await op(s, action, g, 'nosuchuser00000');
      expect(noUser.statusCode, `${action} unknown user`).toBe(404);
    }
    expect((await s.req({ method: 'GET', url: '/groups/nosuchgroup0000/members' })).statusCode).toBe(404);
    expect((await s.req({ method: 'GET', url: '/users/nosuchuser00000/groups' })).statusCode).toBe(404);
    // A plain user may not add someone else, nor decide anything for others.
    for (const action of ['add', 'approve', 'reject', 'unreject', 'use', 'activate', 'remove'] as const) {
      const r = await op(s, action, g, alice.id, { key: bob.key });
      expect(r.statusCode, `bob ${action} alice`).toBe(403);
    }
    // Audit keys read but never write.
    expect((await op(s, 'add', g, alice.id, { key: auditKey })).statusCode).toBe(403);
    // A caller without credentials: 401.
    expect((await op(s, 'add', g, alice.id, { key: '' })).statusCode).toBe(401);
  });

  it('lets only one of two concurrent decisions win', async () => {
    const g = await create(s, 'groups', { Name: 'race', RequiresApproval: true, Approvers: [approver.id] });
    expect((await op(s, 'add', g, bob.id, { key: bob.key })).statusCode).toBe(201);
    const results = await Promise.all([
      op(s, 'approve', g, bob.id, { key: approver.key, reason: 'one' }),
      op(s, 'approve', g, bob.id, { reason: 'two' }),
      op(s, 'reject', g, bob.id, { key: syncKey, reason: 'three' }),
    ]);
    // Approving an approved member is an idempotent no-op (200, nothing written), so both approvals
    // may answer 200; what must hold is that at most one of them writes, the chain of states stays
    // consistent, and the rejection (allowed from requested, approved and active) always wins last.
    expect(results[2]!.statusCode).toBe(200);
    for (const r of results) expect([200, 409]).toContain(r.statusCode);
    // The history is a single line of transitions, each from the state the previous one left.
    const hist = jsonLines(
      (await s.req({ method: 'GET', url: `/groups/${g}/members/${bob.id}/history` })).body,
    );
    const items = hist.map((l) => l.Item as { State: string; LastChange: { FromState: string } });
    for (let i = 1; i < items.length; i++) expect(items[i]!.LastChange.FromState).toBe(items[i - 1]!.State);
    expect(items.filter((i) => i.State === 'approved').length).toBeLessThanOrEqual(1);
    expect(items[items.length - 1]!.State).toBe('rejected');
  });

  it('lets a decider reject someone who never asked (201), and remove a rejected member', async () => {
    const g = await create(s, 'groups', {
      Name: 'blocklist',
      RequiresApproval: true,
      Approvers: [approver.id],
    });
    const rej = await op(s, 'reject', g, bob.id, { key: approver.key, reason: 'not this one' });
    expect(rej.statusCode).toBe(201);
    expect(rej.json()).toMatchObject({ State: 'rejected', LastChange: { FromState: 'none' } });
    expect((await op(s, 'add', g, bob.id, { key: bob.key })).statusCode).toBe(409);
    expect((await op(s, 'remove', g, bob.id, { key: approver.key })).statusCode).toBe(204);
    expect((await op(s, 'add', g, bob.id, { key: bob.key })).json().State).toBe('requested');
  });

  it('validates the reason', async () => {
    const g = await create(s, 'groups', { Name: 'reasons', RequiresApproval: true });
    const long = await op(s, 'add', g, alice.id, { key: alice.key, reason: 'x'.repeat(1025) });
    expect(long.statusCode).toBe(400);
    expect(long.json().Field).toBe('Reason');
    const ctrl = await op(s, 'add', g, alice.id, { key: alice.key, reason: 'a\u0000b' });
    expect(ctrl.statusCode).toBe(400);
    const unknown = await s.req({
      method: 'POST',
      url: `/groups/${g}/members/${alice.id}`,
      key: alice.key,
      payload: { Reason: 'x', State: 'active' },
    });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.headers['x-error-code']).toBe('Unknown Field');
    const notString = await s.req({
      method: 'POST',
      url: `/groups/${g}/members/${alice.id}`,
      key: alice.key,
      payload: { Reason: 5 },
    });
    expect(notString.statusCode).toBe(400);
    // Nothing was written by the refused requests.
    expect((await s.req({ method: 'GET', url: `/groups/${g}/members/${alice.id}` })).statusCode).toBe(404);
    // Line breaks are fine; a form body works too.
    const ok = await op(s, 'add', g, alice.id, { key: alice.key, reason: 'line 1\nline 2', form: true });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().Reason).toBe('line 1\nline 2');
  });
});
