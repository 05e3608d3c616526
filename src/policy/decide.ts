import { ApiError, type ErrorKind } from '../core/errors.js';
import { objectTypes } from '../objects/registry.js';
import type { Actor } from './actor.js';
import { all, type Decision, deny } from './decision.js';
import {
  appIsolation,
  appServes,
  ceilingOnCreate,
  ceilingOnGroup,
  ceilingOnStored,
  ceilingOnUser,
  factOr,
  grant,
  keepsAnAdministrator,
  notSelf,
  type PolicyContext,
  type Rule,
  scopes,
  selfOr,
  type Target,
  voucherCovers,
} from './rules.js';

/** Does the action change or reveal a principal (the attack matrix asserts the invariants on these)? */
export type Effect = 'reads' | 'changes';

export interface Action {
  description: string;
  effect: Effect;
  /** The kind of target the action is about. */
  target: string;
  rules: readonly Rule[];
}

/** The object operations of every registered type: `User.update`, `Group.delete`, ... */
function objectActions(): Record<string, Action> {
  const out: Record<string, Action> = {};
  for (const type of objectTypes)
    for (const op of type.ops) {
      const rules: Rule[] = [grant(op)];
      if (op === 'update') rules.push(ceilingOnStored, keepsAnAdministrator('update'));
      if (op === 'delete') rules.push(ceilingOnStored, keepsAnAdministrator('remove'));
      if (op === 'create') rules.push(ceilingOnCreate);
      out[`${type.kind}.${op}`] = {
        description: `${op} a ${type.kind}`,
        effect: op === 'get' || op === 'list' ? 'reads' : 'changes',
        target: type.kind,
        rules,
      };
    }
  return out;
}

const into = (op: string): Action => ({
  description: `membership: ${op} a user in a group (the lifecycle decides the state; this decides whether the caller may act on the user and the group)`,
  effect: 'changes',
  target: 'Membership',
  rules: [ceilingOnUser, ceilingOnGroup],
});
const outOf = (op: string): Action => ({
  description: `membership: ${op} a user's membership`,
  effect: 'changes',
  target: 'Membership',
  rules: [ceilingOnUser],
});

/**
 * Every action the service authorizes, by name. A route, page, factor, back-channel call, agent
 * call or command asks `decide` with one of these names; test/security/matrix.test.ts builds its
 * attack matrix from this list, so an action added without rules fails the build.
 */
export const ACTIONS: Readonly<Record<string, Action>> = {
  ...objectActions(),
  'User.disable': {
    description: 'disable a user: revoke its sessions and keys, disable or delete its accounts',
    effect: 'changes',
    target: 'User',
    rules: [scopes('sync'), ceilingOnStored, keepsAnAdministrator('remove'), notSelf],
  },
  'User.merge': {
    description: 'merge a user into another: the merged-away user stops signing in',
    effect: 'changes',
    target: 'User',
    rules: [scopes(), ceilingOnStored, keepsAnAdministrator('remove')],
  },
  'User.merge-into': {
    description: "receive a merged user's factors, memberships and accounts",
    effect: 'changes',
    target: 'User',
    rules: [scopes(), ceilingOnStored],
  },
  'Account.plan': {
    description: "plan changes to a user's accounts (create, disable, delete them through the App's agent)",
    effect: 'changes',
    target: 'User',
    rules: [scopes('sync'), ceilingOnUser],
  },
  'Membership.add': into('add'),
  'Membership.approve': into('approve'),
  'Membership.activate': into('activate'),
  'Membership.unreject': into('unreject'),
  'Membership.request': {
    description: 'membership: ask to join a group (only for oneself: the lifecycle makes others an add)',
    effect: 'changes',
    target: 'Membership',
    rules: [ceilingOnUser],
  },
  'Membership.use': {
    description: 'membership: record a use (LastUsed), which keeps it from expiring',
    effect: 'changes',
    target: 'Membership',
    rules: [scopes('sync')],
  },
  'Membership.remove': outOf('remove'),
  'Membership.reject': outOf('reject'),
  'VouchRequest.approve': {
    description: "vouch for a user's sign-in: the voucher's standing must cover the requester's",
    effect: 'changes',
    target: 'User',
    rules: [voucherCovers],
  },
  'App.proxytoken': {
    description: "issue an App's proxy token (the proxy's and agents' credential for that App)",
    effect: 'changes',
    target: 'App',
    rules: [scopes()],
  },
  'App.oidcsecret': {
    description: "issue an App's OpenID client secret",
    effect: 'changes',
    target: 'App',
    rules: [scopes()],
  },
  'User.sessions': {
    description: "list or revoke a user's sessions",
    effect: 'changes',
    target: 'User',
    rules: [selfOr()],
  },
  'User.factors': {
    description:
      "read a user's factor settings and devices (phones, push devices, security keys, e-mail links)",
    effect: 'reads',
    target: 'User',
    rules: [selfOr()],
  },
  'User.links': {
    description: "list a user's links to upstream identity providers",
    effect: 'reads',
    target: 'User',
    rules: [selfOr('audit')],
  },
  'User.reference-video': {
    description: "see a user's reference video (vouchers see it through their request)",
    effect: 'reads',
    target: 'User',
    rules: [selfOr()],
  },
  'User.credentials-reset': {
    description: "reset a user's credentials with an API key (?user=): an administrator's reset",
    effect: 'changes',
    target: 'User',
    rules: [scopes()],
  },
  'User.groups': {
    description: "list a user's memberships",
    effect: 'reads',
    target: 'User',
    rules: [selfOr('audit', 'sync')],
  },
  'User.account-suggestions': {
    description: "suggest changes to a user's accounts",
    effect: 'reads',
    target: 'User',
    rules: [selfOr('audit', 'sync')],
  },
  'User.merge-suggestions': {
    description: 'list the users that look like duplicates',
    effect: 'reads',
    target: 'User',
    rules: [scopes('audit', 'sync')],
  },
  'VouchRequest.administer': {
    description: 'see and cancel any vouch request',
    effect: 'changes',
    target: 'VouchRequest',
    rules: [scopes()],
  },
  'Group.members': {
    description: "list or read a group's memberships",
    effect: 'reads',
    target: 'Group',
    rules: [factOr('approver', 'audit', 'sync')],
  },
  'Group.report': {
    description: 'the approvals report (GET /groups/report.csv)',
    effect: 'reads',
    target: 'Group',
    rules: [scopes('audit')],
  },
  'Group.check': {
    description: 'check memberships on behalf of an application (POST /groups/check)',
    effect: 'reads',
    target: 'Group',
    rules: [scopes('sync')],
  },
  'Audit.read': {
    description: 'read the audit trail (GET /audit, kind AuditEntry on the event stream)',
    effect: 'reads',
    target: 'Policy',
    rules: [scopes('audit')],
  },
  'Metrics.read': {
    description: 'read the Prometheus metrics',
    effect: 'reads',
    target: 'Policy',
    rules: [scopes('audit')],
  },
  'OIDC.rotate-keys': {
    description: "rotate the OpenID provider's signing key",
    effect: 'changes',
    target: 'Policy',
    rules: [scopes()],
  },
  'App.use': {
    description:
      'may the user use the App: sign in to it, pass its proxy, get tokens from its OpenID client (target: the App; the user in userId)',
    effect: 'reads',
    target: 'App',
    rules: [appServes],
  },
  'App.learn-user': {
    description:
      "an App's own credential (proxy token, OpenID client, provisioning agent) learns about or acts on a user",
    effect: 'reads',
    target: 'User',
    rules: [appIsolation],
  },
  'Policy.explain': {
    description: 'ask why a decision is what it is (GET /policy/explain)',
    effect: 'reads',
    target: 'Policy',
    rules: [scopes()],
  },
};

/** The one decision point: applies the action's rules in order; the first refusal decides. */
export async function decide(
  ctx: PolicyContext,
  actor: Actor,
  action: string,
  target: Target,
): Promise<Decision> {
  const a = ACTIONS[action];
  if (!a) return deny('policy.unknown-action', `no rule decides ${action}`);
  return all(a.rules.map((r) => () => r.check(ctx, actor, target)));
}

/** How a refusal is answered: hidden objects are missing, the last administrator is a conflict. */
const ANSWER: Record<string, ErrorKind> = {
  'grant.own': 'NotFound',
  'admin.last-active': 'LastAdministrator',
  'user.not-self': 'Conflict',
};

/** The error for a refusal, carrying its rule for the audit trail. */
export function refusal(d: Decision): ApiError {
  return new ApiError(ANSWER[d.Rule] ?? 'Forbidden', d.Reason, { rule: d.Rule });
}

/** decide, throwing the refusal: what routes and features call. */
export async function enforce(
  ctx: PolicyContext,
  actor: Actor,
  action: string,
  target: Target,
): Promise<Decision> {
  const d = await decide(ctx, actor, action, target);
  if (!d.Allowed) throw refusal(d);
  return d;
}
