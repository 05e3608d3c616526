import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { addMember, claim, report, setTenant, world } from './fixture.js';

/** #16: group membership → suggestion → plan → approval → agent → initial password → disable. */
describe.each(backends())('account lifecycle on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('walks a user from membership to an applied account, its password, and disable', async () => {
    const w = await world(s);
    // Another user's suggestions are not theirs to see; a user sees their own; nobody plans with a user key.
    const stranger = await s.req({ method: 'POST', url: '/users', payload: {} });
    const strangerKey = await s.keyFor(['user'], stranger.headers['x-id'] as string);
    expect(
      (await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, key: strangerKey }))
        .statusCode,
    ).toBe(404);
    const ownKey = await s.keyFor(['user'], w.userId);
    expect(
      (await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, key: ownKey, payload: {} }))
        .statusCode,
    ).toBe(200);
    const ownPlan = await s.req({
      method: 'POST',
      url: `/users/${w.userId}/accounts/suggest`,
      key: ownKey,
      payload: { Plan: {} },
    });
    expect(ownPlan.statusCode).toBe(403);
    expect(
      (
        await s.req({
          method: 'POST',
          url: `/users/${w.userId}/accounts/suggest`,
          payload: { Plan: { Bogus: 1 } },
        })
      ).statusCode,
    ).toBe(400);
    expect(
      (await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, payload: { Other: 1 } }))
        .statusCode,
    ).toBe(400);
    // Not a member yet: nothing to suggest.
    const none = await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, payload: {} });
    expect(none.statusCode).toBe(200);
    expect(none.json().Changes).toEqual([]);

    await addMember(s, w.groupId, w.userId);
    const sug = await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, payload: {} });
    expect(sug.json().Changes).toEqual([
      expect.objectContaining({
        Action: 'create',
        AppID: w.appId,
        UserID: w.userId,
        AccountName: `u${w.tag}`,
      }),
    ]);

    await setTenant(s, { AccountChangesNeedApproval: true });
    try {
      const planned = await s.req({
        method: 'POST',
        url: `/users/${w.userId}/accounts/suggest`,
        payload: { Plan: { Name: 'onboarding' } },
      });
      expect(planned.statusCode).toBe(201);
      const planId = planned.json().PlanID as string;
      expect(planned.json().PlanState).toBe('proposed');
      // Planned, not approved: the agent gets nothing; the suggestion is not repeated.
      expect((await claim(s, w.token)).Changes).toEqual([]);
      const again = await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, payload: {} });
      expect(again.json().Changes).toEqual([]);
      // A sync key may plan but not approve.
      const sync = await s.keyFor(['sync']);
      const denied = await s.req({ method: 'POST', url: `/accountchangeplans/${planId}/approve`, key: sync });
      expect(denied.statusCode).toBe(403);
      const ok = await s.req({ method: 'POST', url: `/accountchangeplans/${planId}/approve` });
      expect(ok.statusCode).toBe(200);
      expect(ok.json().State).toBe('approved');
      const twice = await s.req({ method: 'POST', url: `/accountchangeplans/${planId}/approve` });
      expect(twice.statusCode).toBe(409);
      expect(twice.json().Message).toMatch(/approved/);
    } finally {
      await setTenant(s, { AccountChangesNeedApproval: false });
    }

    const got = await claim(s, w.token, { Name: 'agent-1', Version: '1.2.3' });
    expect(got.Changes).toHaveLength(1);
    const c = got.Changes[0] as (typeof got.Changes)[number];
    expect(c.Change.State).toBe('in_progress');
    expect(c.InitialPassword).toMatch(/^[A-Za-z2-9]{20}$/);
    const agent = await s.req({ method: 'GET', url: `/remoteagents/${got.RemoteAgentID}` });
    expect(agent.json()).toMatchObject({
      Kind: 'provisioning',
      Version: '1.2.3',
      AppID: w.appId,
      Health: 'ok',
    });
    // A claim never holds a password in the stored objects.
    expect(JSON.stringify((await s.req({ method: 'GET', url: '/accountchanges' })).body)).not.toContain(
      c.InitialPassword,
    );

    const applied = await report(s, w.token, String(c.Change.ID), { Lease: c.Lease, Result: 'applied' });
    expect(applied.statusCode).toBe(200);
    expect(applied.json().State).toBe('applied');
    const accountId = `${w.appId}.${w.userId}`;
    const account = await s.req({ method: 'GET', url: `/accounts/${accountId}` });
    expect(account.json()).toMatchObject({
      UserID: w.userId,
      AppID: w.appId,
      Name: `u${w.tag}`,
      State: 'active',
      HaveInitialPassword: true,
    });
    // Accounts are read-only through the generic API.
    expect((await s.req({ method: 'POST', url: '/accounts', payload: {} })).statusCode).toBe(405);
    expect(
      (await s.req({ method: 'DELETE', url: `/accounts/${accountId}`, headers: { 'if-match': '*' } }))
        .statusCode,
    ).toBe(405);

    // The password: its user fetches it once; others learn nothing.
    const userKey = await s.keyFor(['user'], w.userId);
    const other = await s.req({ method: 'POST', url: '/users', payload: {} });
    const otherKey = await s.keyFor(['user'], other.headers['x-id'] as string);
    expect(
      (await s.req({ method: 'GET', url: `/accounts/${accountId}/password`, key: otherKey })).statusCode,
    ).toBe(404);
    expect(
      (await s.req({ method: 'POST', url: `/accounts/${accountId}/password`, key: otherKey })).statusCode,
    ).toBe(404);
    const audit = await s.keyFor(['audit']);
    expect(
      (await s.req({ method: 'POST', url: `/accounts/${accountId}/password`, key: audit })).statusCode,
    ).toBe(404);
    const has = await s.req({ method: 'GET', url: `/accounts/${accountId}/password`, key: userKey });
    expect(has.json()).toMatchObject({ HaveInitialPassword: true });
    expect(has.body).not.toContain(c.InitialPassword);
    const [first, second] = await Promise.all([
      s.req({ method: 'POST', url: `/accounts/${accountId}/password`, key: userKey }),
      s.req({ method: 'POST', url: `/accounts/${accountId}/password`, key: userKey }),
    ]);
    const statuses = [first?.statusCode, second?.statusCode].sort();
    expect(statuses).toEqual([200, 404]);
    const winner = first?.statusCode === 200 ? first : second;
    expect(winner?.json().Password).toBe(c.InitialPassword);
    const after = await s.req({ method: 'GET', url: `/accounts/${accountId}/password`, key: userKey });
    expect(after.json()).toMatchObject({ HaveInitialPassword: false, PasswordFetchedBy: w.userId });
    expect(s.logs.join('\n')).not.toContain(c.InitialPassword);

    // Disable: keys dead at once, the account reported and a disable change ready for the agent.
    const dis = await s.req({
      method: 'POST',
      url: `/users/${w.userId}/disable`,
      payload: { Reason: 'left the company' },
    });
    expect(dis.statusCode).toBe(200);
    expect(dis.headers['content-type']).toMatch(/^application\/json/);
    const result = dis.json();
    expect(result.Accounts).toEqual([expect.objectContaining({ AccountID: accountId, Action: 'disable' })]);
    expect(result.APIKeysRevoked.length).toBeGreaterThanOrEqual(1);
    expect((await s.req({ method: 'GET', url: '/users/me', key: userKey })).statusCode).toBe(401);
    const off = await claim(s, w.token, { Name: 'agent-1' });
    expect(off.Changes.map((x) => x.Change.Action)).toEqual(['disable']);
    const offChange = off.Changes[0] as (typeof off.Changes)[number];
    expect(offChange.InitialPassword).toBeUndefined();
    expect(offChange.Change.Reason).toBe('the user was disabled: left the company');
    expect(
      (await report(s, w.token, String(offChange.Change.ID), { Lease: offChange.Lease, Result: 'applied' }))
        .statusCode,
    ).toBe(200);
    expect((await s.req({ method: 'GET', url: `/accounts/${accountId}` })).json().State).toBe('disabled');
    // Disabled: the suggestion is to keep it so (nothing to do).
    expect(
      (await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, payload: {} })).json()
        .Changes,
    ).toEqual([]);
  });

  it('refuses a transition the table does not allow with 409 naming the state', async () => {
    const w = await world(s);
    const created = await s.req({
      method: 'POST',
      url: '/accountchanges',
      payload: { UserID: w.userId, AppID: w.appId, Action: 'create' },
    });
    expect(created.statusCode).toBe(201);
    const id = created.headers['x-id'] as string;
    expect((await s.req({ method: 'GET', url: `/accountchanges/${id}` })).json().State).toBe('planned');
    expect((await s.req({ method: 'POST', url: `/accountchanges/${id}/retry` })).json().Message).toMatch(
      /planned/,
    );
    expect((await s.req({ method: 'POST', url: `/accountchanges/${id}/retry` })).statusCode).toBe(409);
    expect((await s.req({ method: 'POST', url: `/accountchanges/${id}/cancel` })).statusCode).toBe(200);
    const get = await s.req({ method: 'GET', url: `/accountchanges/${id}` });
    expect(get.json().State).toBe('cancelled');
    // A change that left "planned" is a record: editing it is refused, naming the state.
    const put = await s.req({
      method: 'PUT',
      url: `/accountchanges/${id}`,
      payload: { ...(get.json() as object), Action: 'delete' },
      headers: { 'if-match': get.headers.etag as string },
    });
    expect(put.statusCode).toBe(409);
    expect(put.json().Message).toMatch(/cancelled/);
    // The State field cannot be written by a client.
    const own = await s.req({
      method: 'POST',
      url: '/accountchanges',
      payload: { UserID: w.userId, AppID: w.appId, State: 'applied' },
    });
    expect((await s.req({ method: 'GET', url: `/accountchanges/${own.headers['x-id']}` })).json().State).toBe(
      'planned',
    );
    // Agents: only with their App's token, only their App's changes.
    expect(
      (await s.req({ method: 'POST', url: '/accountchanges/claim', key: '', payload: {} })).statusCode,
    ).toBe(401);
    const adminAsAgent = await s.req({ method: 'POST', url: '/accountchanges/claim', payload: {} });
    expect(adminAsAgent.statusCode).toBe(401);
    const w2 = await world(s);
    const theirs = await claim(s, w2.token);
    expect(theirs.Changes.every((c) => c.Change.AppID === w2.appId)).toBe(true);
    const mine = await claim(s, w.token);
    const m = mine.Changes[0];
    expect(m).toBeDefined();
    const wrongApp = await report(s, w2.token, String(m?.Change.ID), { Lease: m?.Lease, Result: 'applied' });
    expect(wrongApp.statusCode).toBe(404);
    const badLease = await report(s, w.token, String(m?.Change.ID), {
      Lease: 'x'.repeat(43),
      Result: 'applied',
    });
    expect(badLease.statusCode).toBe(409);
    expect(await claim(s, w.token, { LeaseSeconds: 5 }).catch((e: Error) => e.message)).toMatch(/400/);
  });
});
