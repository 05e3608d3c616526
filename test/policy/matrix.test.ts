import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { membershipId } from '../../src/objects/membership.js';
import type { Actor } from '../../src/policy/actor.js';
import { ACTIONS, decide } from '../../src/policy/decide.js';
import type { Target } from '../../src/policy/rules.js';
import type { Principal } from '../../src/schema/principal.js';
import type { Scope } from '../../src/schema/type.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account } from '../kit/index.js';

/**
 * The attack matrix of #23, built from the policy's own list of actions (src/policy/decide.ts
 * ACTIONS): every actor kind × every action that changes a principal × every kind of target,
 * asserting the privilege ceiling: no actor without admin may act on an administrator, on the
 * owner of a key with a scope it lacks, or on a group such a principal is in (unless it acts on
 * itself). An action added without rules, or one this test does not know how to aim, fails here.
 */

/** Actions that act on no principal: the service's configuration and its own records. Each was reviewed. */
const NO_PRINCIPAL = new Set([
  'Tenant',
  'App',
  'VirtualHost',
  'Script',
  'ScriptLog',
  'Metric',
  'RemoteAgent',
  'AccountChangePlan',
  'ActivationCode',
  'OIDCClient',
  'Policy',
]);

/**
 * Actions that change a record about a principal without giving power over it, each reviewed:
 * recording a membership's use (LastUsed) only keeps it from expiring, as sync is documented to.
 */
const CHANGES_NO_POWER = new Set(['Membership.use']);

/** How each action's target is aimed at a principal: the kinds of target the matrix tries. */
const AIMED = new Set(['User', 'Membership', 'Group', 'APIKey', 'AccountChange', 'Account', 'VouchRequest']);

describe.each(backends())('the attack matrix on %s', { timeout: 300_000 }, (backend) => {
  let s: TestService;
  /** Fixture: principals and what each stands for (written out here, not computed by the policy). */
  const f = {} as {
    admin: string;
    keyOwner: string;
    adminKeyDoc: Record<string, unknown>;
    ordinary: string;
    newcomer: string;
    approver: string;
    privGroup: Record<string, unknown>;
    plainGroup: Record<string, unknown>;
  };
  beforeAll(async () => {
    s = await startTestService(backend);
    f.admin = (await account(s, { admin: true, tag: 'adm' })).id;
    f.keyOwner = (await account(s, { tag: 'owner' })).id;
    const k = await s.req({
      method: 'POST',
      url: '/apikeys',
      payload: { Scopes: ['admin'], UserID: f.keyOwner },
    });
    f.adminKeyDoc = (await s.req({ url: `/apikeys/${k.headers['x-id']}` })).json();
    f.ordinary = (await account(s, { tag: 'ord' })).id;
    f.approver = (await account(s, { tag: 'appr' })).id;
    f.newcomer = (await account(s, { tag: 'new' })).id;
    const g = async (name: string, members: string[]) => {
      const r = await s.req({
        method: 'POST',
        url: '/groups',
        payload: { Name: name, RequiresApproval: true, Approvers: [f.approver] },
      });
      const id = String(r.headers['x-id']);
      for (const m of members) await s.req({ method: 'POST', url: `/groups/${id}/members/${m}` });
      return (await s.req({ url: `/groups/${id}` })).json();
    };
    f.privGroup = await g('with-admin', [f.admin, f.ordinary]);
    f.plainGroup = await g('plain', [f.ordinary]);
  });
  afterAll(async () => s?.close());

  const principal = (via: 'apikey' | 'session', userId: string, scopes: Scope[]): Principal => ({
    via,
    userId,
    scopes: new Set(scopes),
    ...(via === 'session' ? { integrityLevel: 3 } : { keyId: `k-${scopes.join('-')}` }),
  });
  /** Every actor kind without admin, with the user it acts for ('' for none). */
  const actors = (): [string, Actor][] => [
    ['sync key', principal('apikey', '', ['sync'])],
    ['audit key', principal('apikey', '', ['audit'])],
    ['sync+audit+user key of an ordinary user', principal('apikey', f.ordinary, ['sync', 'audit', 'user'])],
    ['user key of an ordinary user', principal('apikey', f.ordinary, ['user'])],
    ['session of an ordinary user', principal('session', f.ordinary, ['user'])],
    ['session of a group approver', principal('session', f.approver, ['user'])],
    ["an App's proxy token", { via: 'app', appId: 'app1', credential: 'proxy' }],
    ["an App's OpenID client", { via: 'app', appId: 'app1', credential: 'oidc' }],
    ["an App's provisioning agent", { via: 'app', appId: 'app1', credential: 'agent' }],
  ];

  /** Targets of an action that are privileged (must be refused) and, for contrast, ordinary ones. */
  function targets(
    kind: string,
    action: string,
  ): { privileged: [string, Target][]; ordinary: [string, Target][] } {
    // A User, or a record about one (a VouchRequest names its user in UserID).
    const user = (id: string): Target =>
      kind === 'User'
        ? { kind, id, userId: id, doc: { ID: id } }
        : { kind, id: `r-${id}`, userId: id, doc: { UserID: id }, body: { UserID: id } };
    if (kind === 'Membership') {
      const m = (g: Record<string, unknown>, u: string): Target => ({
        kind,
        id: membershipId(String(g.ID), u),
        userId: u,
        group: g,
      });
      const putsIn = /\.(add|approve|activate|unreject)$/.test(action);
      return {
        privileged: [
          ['membership of an administrator', m(f.plainGroup, f.admin)],
          ['membership of an admin-key owner', m(f.plainGroup, f.keyOwner)],
          ...(putsIn
            ? ([['an ordinary user into a group an administrator is in', m(f.privGroup, f.newcomer)]] as [
                string,
                Target,
              ][])
            : []),
        ],
        ordinary: [['membership of an ordinary user in a plain group', m(f.plainGroup, f.ordinary)]],
      };
    }
    if (kind === 'Group')
      return {
        privileged: [
          ['a group an administrator is in', { kind, id: String(f.privGroup.ID), doc: f.privGroup }],
        ],
        ordinary: [],
      };
    if (kind === 'APIKey')
      return {
        privileged: [['an admin-scope key', { kind, id: String(f.adminKeyDoc.ID), doc: f.adminKeyDoc }]],
        ordinary: [],
      };
    if (kind === 'AccountChange' || kind === 'Account') {
      const doc = (u: string) => ({ UserID: u, AppID: 'app1', Action: 'delete', AccountName: 'x' });
      return {
        privileged: [
          [
            "a change to an administrator's account",
            { kind, id: 'c1', doc: doc(f.admin), body: doc(f.admin), userId: f.admin },
          ],
          [
            "a change to an admin-key owner's account",
            { kind, id: 'c2', doc: doc(f.keyOwner), body: doc(f.keyOwner), userId: f.keyOwner },
          ],
        ],
        ordinary: [],
      };
    }
    return {
      privileged: [
        [
          'an administrator',
          kind === 'User'
            ? { ...user(f.admin), doc: { ID: f.admin, Admin: true, Active: true } }
            : user(f.admin),
        ],
        ['the owner of an admin-scope key', user(f.keyOwner)],
      ],
      ordinary: [['an ordinary user', user(f.ordinary)]],
    };
  }

  it('every action has rules, and every action that changes something is aimed by this matrix or reviewed', () => {
    for (const [name, a] of Object.entries(ACTIONS)) {
      expect(a.rules.length, `${name} has no rules`).toBeGreaterThan(0);
      if (a.effect !== 'changes') continue;
      expect(
        AIMED.has(a.target) || NO_PRINCIPAL.has(a.target),
        `${name}: aim it at principals here, or review it into NO_PRINCIPAL`,
      ).toBe(true);
    }
  });

  it('no actor without admin may change a more privileged principal, directly or through a group', async () => {
    let tried = 0;
    const breaches: string[] = [];
    for (const [name, action] of Object.entries(ACTIONS)) {
      if (action.effect !== 'changes' || !AIMED.has(action.target)) continue;
      const op = name.split('.').pop() as string;
      // A new user or group is nobody yet, and has nobody in it.
      if (op === 'create' && (action.target === 'User' || action.target === 'Group')) continue;
      if (CHANGES_NO_POWER.has(name)) continue;
      for (const [who, actor] of actors())
        for (const [what, target] of targets(action.target, name).privileged) {
          if (actor.via !== 'app' && actor.userId !== '' && actor.userId === target.userId) continue;
          const d = await decide(s, actor, name, target);
          tried++;
          if (d.Allowed) breaches.push(`${who} may ${name} ${what} (${d.Rule}: ${d.Reason})`);
        }
    }
    expect(breaches).toEqual([]);
    expect(tried).toBeGreaterThan(100);
  });

  it('the ceiling does not refuse what the caller covers: an admin acts on anyone, a sync key on ordinary users', async () => {
    // An administrator's own key (a voucher must be a user).
    const admin = principal('apikey', s.adminId, ['admin']);
    const sync = principal('apikey', '', ['sync']);
    for (const [name, action] of Object.entries(ACTIONS)) {
      if (action.effect !== 'changes' || !AIMED.has(action.target)) continue;
      const t = targets(action.target, name);
      for (const [what, target] of [...t.privileged, ...t.ordinary]) {
        const d = await decide(s, admin, name, target);
        // The admin is refused only by the last-administrator rule (there are two admins here).
        expect(d.Allowed, `admin ${name} ${what}: ${d.Reason}`).toBe(true);
      }
      for (const [what, target] of t.ordinary) {
        const d = await decide(s, sync, name, target);
        if (!d.Allowed) expect(d.Rule, `sync ${name} ${what}: ${d.Reason}`).not.toMatch(/^privilege\./);
      }
    }
  });

  it("an App's own credential changes no principal through the generic actions", async () => {
    for (const [name, action] of Object.entries(ACTIONS)) {
      if (action.effect !== 'changes') continue;
      for (const [who, actor] of actors().filter(([, a]) => a.via === 'app'))
        for (const [what, target] of [
          ...targets(action.target, name).privileged,
          ...targets(action.target, name).ordinary,
        ])
          expect((await decide(s, actor, name, target)).Allowed, `${who} ${name} ${what}`).toBe(false);
    }
  });
});
