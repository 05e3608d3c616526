import { ApiError } from '../../../core/errors.js';
import { Group } from '../../../objects/group.js';
import { Membership } from '../../../objects/membership.js';
import { User } from '../../../objects/user.js';
import { VouchRequest } from '../../../objects/vouchrequest.js';
import { decide } from '../../../policy/decide.js';
import { type Doc, normalizeTimestamp } from '../../../schema/fields.js';
import type { Principal } from '../../../schema/principal.js';
import { iterateWhere } from '../../../store/find.js';
import type { ServiceContext } from '../../../store/service.js';
import { userUsable } from '../../apikeys.js';

/**
 * The vouch request lifecycle as ONE table: which operation, by whom, from which state, to which
 * state. docs/signin.md ("Vouching") carries the same table; test/auth/factors/vouch.test.ts
 * walks every (state, operation) pair against it.
 *
 * Roles: requester (the session that made the request), voucher (a user named in Vouchers, never
 * the requester), system (the service: expiry when ExpireTime has passed).
 */
export type VouchState = 'pending' | 'approved' | 'rejected' | 'cancelled' | 'expired';
export type VouchOp = 'video' | 'approve' | 'decline' | 'cancel' | 'expire';
export type VouchRole = 'requester' | 'voucher' | 'system';

export interface VouchTransition {
  op: VouchOp;
  by: VouchRole;
  from: VouchState;
  to: VouchState;
}

export const STATES: readonly VouchState[] = ['pending', 'approved', 'rejected', 'cancelled', 'expired'];

export const VOUCH_TRANSITIONS: readonly VouchTransition[] = [
  // The requester supplies (or replaces) the recording; the state stays pending.
  { op: 'video', by: 'requester', from: 'pending', to: 'pending' },
  // Approval also needs the video, the voucher's level and the video the voucher watched.
  { op: 'approve', by: 'voucher', from: 'pending', to: 'approved' },
  { op: 'decline', by: 'voucher', from: 'pending', to: 'rejected' },
  { op: 'cancel', by: 'requester', from: 'pending', to: 'cancelled' },
  { op: 'expire', by: 'system', from: 'pending', to: 'expired' },
];

/** The state an operation leads to, or a 409 Invalid Transition naming why not. */
export function nextState(from: VouchState, op: VouchOp, by: VouchRole): VouchState {
  const t = VOUCH_TRANSITIONS.find((x) => x.op === op && x.by === by && x.from === from);
  if (!t)
    throw new ApiError(
      'InvalidTransition',
      `a vouch request that is ${from} cannot be changed by "${op}"${from === 'pending' ? ` by the ${by}` : ''}`,
    );
  return t.to;
}

/** How long a request stays pending. */
export const VOUCH_TTL_MS = 30 * 60_000;
/** Pending requests a user may have at once (a new one from the same session replaces its own). */
export const MAX_PENDING = 3;

export const stamp = (ms = Date.now()) => normalizeTimestamp(new Date(ms).toISOString()) as string;

export function isExpired(doc: Doc, now = Date.now()): boolean {
  const t = Date.parse(String(doc.ExpireTime ?? ''));
  return !Number.isFinite(t) || t <= now || String(doc.ExpireTime).startsWith('0001-');
}

/**
 * Applies one transition to a stored request in one transaction: a pending request past its
 * ExpireTime is expired first (so nothing is decided on it), then `op` must be allowed from the
 * state found. `check` sees the current doc and may refuse (throw) before anything is written;
 * `extra` adds fields to the new doc. Returns the stored doc.
 */
export async function transition(
  ctx: ServiceContext,
  id: string,
  op: VouchOp,
  by: VouchRole,
  opts: { check?: (doc: Doc, secret: Doc) => void; extra?: (doc: Doc) => Doc } = {},
): Promise<Doc> {
  let expiredNow = false;
  const stored = await ctx.store.systemPut(VouchRequest, id, (doc, secret) => {
    if (!doc) throw new ApiError('NotFound', `VouchRequest ${id} does not exist`);
    if (doc.State === 'pending' && isExpired(doc)) {
      expiredNow = true;
      return { doc: { ...doc, State: 'expired', DecideTime: stamp() }, secret };
    }
    opts.check?.(doc, secret);
    const to = nextState(doc.State as VouchState, op, by);
    const next: Doc = { ...doc, State: to, ...(opts.extra ? opts.extra(doc) : {}) };
    if (to !== 'pending') next.DecideTime = stamp();
    return { doc: next, secret };
  });
  if (!stored) throw new ApiError('NotFound', `VouchRequest ${id} does not exist`);
  if (expiredNow) nextState('expired', op, by); // throws: nothing may happen to an expired request
  return stored.doc;
}

/** The request, expired first when its time has passed (a read sees the true state). */
export async function currentRequest(ctx: ServiceContext, id: string) {
  const obj = await ctx.store.get(VouchRequest, id);
  if (!obj) return undefined;
  if (obj.doc.State === 'pending' && isExpired(obj.doc)) {
    try {
      await transition(ctx, id, 'expire', 'system');
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 409) throw e;
    }
    return ctx.store.get(VouchRequest, id);
  }
  return obj;
}

/** Bounds the work of one eligibility computation (groups looked at, members per group). */
const MAX_GROUPS = 64;

/**
 * Who may vouch for `userId`, each with the groups that make them eligible:
 *
 * - colleagues: active members of a group the user is an active member of, when that group
 *   RequiresApproval (nobody made themselves a member of it, so nobody made themselves a
 *   colleague);
 * - approvers: the Approvers of such a group (of any group the user is active in), and active
 *   members of its ApproverGroup when that group RequiresApproval itself.
 *
 * Never the user themself, never a user who may not sign in (disabled, suspended), never a user
 * whose standing does not cover the user's (src/policy: vouch.ceiling). Open groups
 * (joined without approval) make nobody eligible: an attacker could join one to vouch.
 */
export async function eligibleVouchers(
  ctx: ServiceContext,
  userId: string,
): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  const add = (voucher: string, via: string) => {
    if (voucher === '' || voucher === userId) return;
    const s = out.get(voucher) ?? new Set<string>();
    s.add(via);
    out.set(voucher, s);
  };
  const activeMembers = async (groupId: string) => {
    const ids: string[] = [];
    for await (const m of iterateWhere(ctx.store, Membership, { GroupID: groupId, State: 'active' }))
      ids.push(String(m.UserID));
    return ids;
  };
  let seen = 0;
  for await (const m of iterateWhere(ctx.store, Membership, { UserID: userId, State: 'active' })) {
    if (++seen > MAX_GROUPS) break;
    const groupId = String(m.GroupID);
    const g = await ctx.store.get(Group, groupId);
    if (!g) continue;
    if (g.doc.RequiresApproval === true) for (const u of await activeMembers(groupId)) add(u, groupId);
    for (const a of (g.doc.Approvers as string[] | undefined) ?? []) add(a, groupId);
    const ag = String(g.doc.ApproverGroup ?? '');
    if (ag !== '') {
      const approverGroup = await ctx.store.get(Group, ag);
      if (approverGroup?.doc.RequiresApproval === true) for (const u of await activeMembers(ag)) add(u, ag);
    }
  }
  for (const id of [...out.keys()]) {
    const u = await ctx.store.get(User, id);
    if (!u || !userUsable(u.doc)) out.delete(id);
    // A voucher at least as privileged as the user vouched for (the policy's vouch ceiling): an
    // approver who put an administrator into her group does not thereby vouch for him.
    else if (
      !(await decide(ctx, voucherActor(id), 'VouchRequest.approve', { kind: 'User', id: userId, userId }))
        .Allowed
    )
      out.delete(id);
  }
  return out;
}

/** A voucher as the policy sees one: the user, judged by its stored standing (not a session's scopes). */
export const voucherActor = (userId: string): Principal => ({ via: 'session', userId, scopes: new Set() });
