/**
 * The membership lifecycle as ONE table: which operation, by whom, from which states, to which
 * state. docs/groups.md carries the same table; test/groups/lifecycle.test.ts walks it.
 *
 * States: none (no membership object), requested, approved, active, rejected, expired.
 * "removed" is written just before a membership object is deleted, so the change log keeps who
 * removed it and why; a stored "removed" (left by a crash between the two writes) counts as none.
 */
export type State = 'none' | 'requested' | 'approved' | 'active' | 'rejected' | 'expired';

export type MemberOp =
  | 'add'
  | 'request'
  | 'approve'
  | 'activate'
  | 'use'
  | 'reject'
  | 'unreject'
  | 'remove'
  | 'expire';

/**
 * Roles a caller can hold towards one (group, user) pair:
 * - admin: an admin-scope key (or admin session);
 * - sync: a sync-scope key (administrative changes to users and groups);
 * - approver: a user-scope caller listed in the group's Approvers or an active member of its
 *   ApproverGroup, acting on SOMEONE ELSE (nobody approves themselves);
 * - member: a user-scope caller acting on their own membership;
 * - system: the service itself (expiry; uses reported by the proxy back channel).
 */
export type Role = 'admin' | 'sync' | 'approver' | 'member' | 'system';

/**
 * Where a transition leads. GRANT: "approved" when the group RequiresActivation, else "active".
 * REQUEST: "requested" when the group RequiresApproval, else GRANT. deleted: the object is removed.
 * SAME: the state does not change (a repeated add, approve or activate answers 200 and writes
 * nothing, except that an add or approve records the approval when the membership has none).
 */
export type Target = Exclude<State, 'none'> | 'GRANT' | 'REQUEST' | 'SAME' | 'deleted';

export interface Transition {
  op: MemberOp;
  by: readonly Role[];
  from: readonly State[];
  to: Target;
}

const DECIDERS: readonly Role[] = ['admin', 'sync', 'approver'];

export const TRANSITIONS: readonly Transition[] = [
  // A decider's add and approve are the same decision; only a standing rejection blocks them.
  { op: 'add', by: DECIDERS, from: ['none', 'requested', 'expired'], to: 'GRANT' },
  { op: 'add', by: DECIDERS, from: ['approved', 'active'], to: 'SAME' },
  { op: 'request', by: ['member'], from: ['none', 'expired'], to: 'REQUEST' },
  { op: 'approve', by: DECIDERS, from: ['none', 'requested', 'expired'], to: 'GRANT' },
  { op: 'approve', by: DECIDERS, from: ['approved', 'active'], to: 'SAME' },
  { op: 'activate', by: ['member', 'admin'], from: ['approved'], to: 'active' },
  { op: 'activate', by: ['member', 'admin'], from: ['active'], to: 'SAME' },
  { op: 'use', by: ['admin', 'sync', 'system'], from: ['active'], to: 'active' },
  {
    op: 'reject',
    by: DECIDERS,
    from: ['none', 'requested', 'approved', 'active', 'expired'],
    to: 'rejected',
  },
  { op: 'unreject', by: DECIDERS, from: ['rejected'], to: 'requested' },
  {
    op: 'remove',
    by: DECIDERS,
    from: ['requested', 'approved', 'active', 'rejected', 'expired'],
    to: 'deleted',
  },
  // Members may leave or withdraw, but not erase a rejection (that would let them ask again).
  { op: 'remove', by: ['member'], from: ['requested', 'approved', 'active', 'expired'], to: 'deleted' },
  { op: 'expire', by: ['system'], from: ['active'], to: 'expired' },
];

/** The rows of `op` that any of `roles` may use. */
export function rowsFor(op: MemberOp, roles: ReadonlySet<Role>): Transition[] {
  return TRANSITIONS.filter((t) => t.op === op && t.by.some((r) => roles.has(r)));
}

/** The rows of `op` whatever the role, for messages. */
export function statesAllowing(op: MemberOp, roles: ReadonlySet<Role>): State[] {
  return [...new Set(rowsFor(op, roles).flatMap((t) => t.from))];
}

/** Resolves a symbolic target against the group's settings. */
export function resolveTarget(
  to: Target,
  group: { RequiresApproval: boolean; RequiresActivation: boolean },
  from: State,
): Exclude<State, 'none'> | 'deleted' {
  if (to === 'REQUEST') return group.RequiresApproval ? 'requested' : resolveTarget('GRANT', group, from);
  if (to === 'GRANT') return group.RequiresActivation ? 'approved' : 'active';
  if (to === 'SAME') {
    if (from === 'none') throw new Error('SAME from none: the transition table is wrong');
    return from;
  }
  return to;
}
