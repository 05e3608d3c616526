/**
 * The lifecycle of account changes and plans as ONE table each: which operation, by whom, from
 * which states, to which state. docs/directory.md carries the same tables;
 * test/directory/states.test.ts walks them against the API.
 */
import { ApiError } from '../core/errors.js';

export type ChangeState = 'planned' | 'approved' | 'in_progress' | 'applied' | 'failed' | 'cancelled';
export type ChangeOp = 'approve' | 'claim' | 'reclaim' | 'apply' | 'fail' | 'retry' | 'cancel';

/**
 * - admin: an admin-scope key or administrator session;
 * - sync: a sync-scope key;
 * - agent: a provisioning agent of the change's App (its proxy token), holding the current lease
 *   for apply and fail;
 * - system: the service itself (approval when the tenant does not require it; disable).
 */
export type ChangeRole = 'admin' | 'sync' | 'agent' | 'system';

export interface ChangeTransition {
  op: ChangeOp;
  by: readonly ChangeRole[];
  from: readonly ChangeState[];
  to: ChangeState;
}

export const CHANGE_TRANSITIONS: readonly ChangeTransition[] = [
  { op: 'approve', by: ['admin', 'system'], from: ['planned'], to: 'approved' },
  { op: 'claim', by: ['agent'], from: ['approved'], to: 'in_progress' },
  // Only once the lease has ended (the agent crashed or hung): the old lease is void from then on.
  { op: 'reclaim', by: ['agent'], from: ['in_progress'], to: 'in_progress' },
  { op: 'apply', by: ['agent'], from: ['in_progress'], to: 'applied' },
  { op: 'fail', by: ['agent'], from: ['in_progress'], to: 'failed' },
  { op: 'retry', by: ['admin', 'sync'], from: ['failed'], to: 'approved' },
  { op: 'cancel', by: ['admin', 'sync', 'system'], from: ['planned', 'approved', 'failed'], to: 'cancelled' },
];

export type PlanState = 'proposed' | 'approved' | 'cancelled';
export type PlanOp = 'approve' | 'cancel';

export const PLAN_TRANSITIONS: readonly {
  op: PlanOp;
  by: readonly ChangeRole[];
  from: readonly PlanState[];
  to: PlanState;
}[] = [
  // Approving a plan approves its planned changes; cancelling it cancels those not yet in progress.
  { op: 'approve', by: ['admin', 'system'], from: ['proposed'], to: 'approved' },
  { op: 'cancel', by: ['admin', 'sync'], from: ['proposed', 'approved'], to: 'cancelled' },
];

/** The target of `op` from `from` for `role`; 403 when the role may never, 409 naming the state. */
export function changeTarget(op: ChangeOp, from: string, role: ChangeRole): ChangeState {
  return target(CHANGE_TRANSITIONS, op, from, role, 'change') as ChangeState;
}

export function planTarget(op: PlanOp, from: string, role: ChangeRole): PlanState {
  return target(PLAN_TRANSITIONS, op, from, role, 'plan') as PlanState;
}

function target(
  table: readonly { op: string; by: readonly ChangeRole[]; from: readonly string[]; to: string }[],
  op: string,
  from: string,
  role: ChangeRole,
  what: string,
): string {
  const rows = table.filter((t) => t.op === op && t.by.includes(role));
  if (rows.length === 0) throw new ApiError('Forbidden', `your credentials may not ${op} an account ${what}`);
  const row = rows.find((t) => t.from.includes(from));
  if (!row) {
    const allowed = [...new Set(rows.flatMap((t) => t.from))].join(', ');
    throw new ApiError(
      'InvalidTransition',
      `cannot ${op} an account ${what} that is ${from}; ${op} applies to: ${allowed}`,
    );
  }
  return row.to;
}
