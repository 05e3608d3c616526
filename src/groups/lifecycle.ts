import type { Principal } from '../auth/principal.js';
import { ApiError } from '../core/errors.js';
import { insideRegions } from '../core/regions.js';
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import { User } from '../objects/user.js';
import { enforce } from '../policy/decide.js';
import { membershipCounts } from '../policy/memberships.js';
import { type Doc, normalizeTimestamp, timestampMs, ZERO_TIME } from '../schema/fields.js';
import type { StoredObject } from '../store/objects.js';
import type { ServiceContext } from '../store/service.js';
import { type MemberOp, type Role, resolveTarget, rowsFor, type State, statesAllowing } from './states.js';

const DAY_MS = 86_400_000;
/** POST .../use records at most one use per membership per minute. */
export const USE_GRANULARITY_MS = 60_000;

export interface GroupSettings {
  ID: string;
  Name: string;
  RequiresApproval: boolean;
  RequiresActivation: boolean;
  Approvers: string[];
  ApproverGroup: string;
  IntegrityLevel: number;
  /** Where a session must be for the membership to count (empty: anywhere); docs/signin.md. */
  LocationRegions: string[];
  ExpireUnusedDays: number;
}

/** A session's reported position (POST /auth/location), as group location checks read it. */
export interface ReportedLocation {
  Latitude: number;
  Longitude: number;
}

/** Does the group's location requirement hold for this position (none known: only if it has none)? */
export const locationCounts = (group: GroupSettings, at: ReportedLocation | undefined) =>
  group.LocationRegions.length === 0 ||
  (at !== undefined && insideRegions(at.Latitude, at.Longitude, group.LocationRegions));

export const groupSettings = (doc: Doc): GroupSettings => ({
  ID: String(doc.ID ?? ''),
  Name: String(doc.Name ?? ''),
  RequiresApproval: doc.RequiresApproval === true,
  RequiresActivation: doc.RequiresActivation === true,
  Approvers: Array.isArray(doc.Approvers) ? (doc.Approvers as string[]) : [],
  ApproverGroup: String(doc.ApproverGroup ?? ''),
  IntegrityLevel: Number(doc.IntegrityLevel ?? 0),
  LocationRegions: Array.isArray(doc.LocationRegions) ? (doc.LocationRegions as string[]) : [],
  ExpireUnusedDays: Number(doc.ExpireUnusedDays ?? 0),
});

/**
 * Now, as stored timestamps are: RFC 3339 UTC, whole seconds (normalizeTimestamp's form). A year
 * from 1000 to 9999 prints as `YYYY-MM-DDTHH:MM:SS.sssZ`, whose first 19 characters are the second
 * the instant falls in; any other year takes normalizeTimestamp's path. Every write stamps its
 * audit entry with this, so it skips the parse.
 */
export const nowStamp = (ms = Date.now()): string => {
  const iso = new Date(ms).toISOString();
  return iso.length === 24 && iso[0] !== '0' ? `${iso.slice(0, 19)}Z` : (normalizeTimestamp(iso) as string);
};

/** The state of a stored membership doc; a missing doc (or a leftover "removed") is none. */
export function stateOf(doc: Doc | undefined): State {
  const s = doc?.State;
  if (s === undefined || s === 'removed') return 'none';
  return s as State;
}

/**
 * Is an active membership due to expire? Only when the group sets ExpireUnusedDays: the
 * membership expires that many days after its last use, or after its activation if it was never
 * used since (a new activation restarts the clock).
 */
export function expiryDue(group: GroupSettings, doc: Doc | undefined, now = Date.now()): boolean {
  if (!doc || stateOf(doc) !== 'active' || group.ExpireUnusedDays <= 0) return false;
  const ref = Math.max(timestampMs(String(doc.LastUsed)), timestampMs(String(doc.ActivateTime)));
  if (!Number.isFinite(ref)) return false;
  return now - ref >= group.ExpireUnusedDays * DAY_MS;
}

export async function loadGroup(ctx: ServiceContext, groupId: string): Promise<GroupSettings> {
  const g = await ctx.store.get(Group, groupId);
  if (!g) throw new ApiError('NotFound', `Group ${groupId} does not exist`);
  return groupSettings(g.doc);
}

export async function requireUser(ctx: ServiceContext, userId: string): Promise<StoredObject> {
  const u = await ctx.store.get(User, userId);
  if (!u) throw new ApiError('NotFound', `User ${userId} does not exist`);
  return u;
}

/** A caller that acts as a person: user scope, admin scope or a signed-in session. */
export const actsAsUser = (p: Principal) =>
  p.via === 'session' || p.scopes.has('user') || p.scopes.has('admin');

/** Is the caller an approver of the group (by the Approvers list or the ApproverGroup)? */
export async function isApprover(ctx: ServiceContext, p: Principal, group: GroupSettings): Promise<boolean> {
  if (p.userId === '' || !actsAsUser(p)) return false;
  if (group.Approvers.includes(p.userId)) return true;
  // An approver group that is the group itself would let members approve newcomers: allowed, it is the admin's choice.
  // The approver group's membership grants this power only where it would pass an access check:
  // at the group's IntegrityLevel (API keys have none: level 0, failing closed as checks do).
  const level = p.via === 'session' ? (p.integrityLevel ?? 0) : 0;
  return membershipCounts(ctx, group.ApproverGroup, p.userId, { level });
}

/** The roles the caller holds towards the membership of `userId` in `group` (see states.ts). */
export async function rolesOf(
  ctx: ServiceContext,
  p: Principal,
  group: GroupSettings,
  userId: string,
): Promise<Set<Role>> {
  const roles = new Set<Role>();
  if (p.scopes.has('admin')) roles.add('admin');
  if (p.scopes.has('sync')) roles.add('sync');
  if (p.userId !== '' && p.userId === userId && actsAsUser(p)) roles.add('member');
  else if (p.userId !== '' && (await isApprover(ctx, p, group))) roles.add('approver');
  return roles;
}

/** Who acts: a principal, or the service itself. */
export type Actor = Principal | 'system';

function changeBy(actor: Actor) {
  if (actor === 'system') return { ByUserID: '', ByKeyID: '', Via: 'system' };
  return { ByUserID: actor.userId, ByKeyID: actor.keyId ?? '', Via: actor.via };
}

export interface OpResult {
  /** The membership after the change; undefined when it was removed. */
  obj: StoredObject | undefined;
  from: State;
  /** A membership object was created by this operation. */
  created: boolean;
}

function forbiddenTransition(
  op: MemberOp,
  from: State,
  roles: ReadonlySet<Role>,
  group: GroupSettings,
  userId: string,
) {
  const allowed = statesAllowing(op, roles);
  return new ApiError(
    'InvalidTransition',
    `the membership of user ${userId} in group ${group.ID} is ${from === 'none' ? 'absent (state none)' : `in state ${from}`}; ${op} is allowed only from: ${allowed.join(', ')}`,
    { field: 'State', headers: { 'X-Membership-State': from } },
  );
}

/**
 * Applies one lifecycle operation, checking the transition inside the write transaction so
 * concurrent operations on the same membership cannot both succeed from the same state.
 * `roles` must be non-empty for op (the caller checked 403 already).
 */
export async function applyOp(
  ctx: ServiceContext,
  opts: {
    op: MemberOp;
    group: GroupSettings;
    userId: string;
    actor: Actor;
    roles: ReadonlySet<Role>;
    reason: string;
  },
): Promise<OpResult> {
  const { op, group, userId, actor, roles, reason } = opts;
  const id = membershipId(group.ID, userId);
  // Who may act on this user and this group is the policy's to say (the privilege ceiling); the
  // table below says only which operations the caller's roles allow from which state.
  if (actor !== 'system' && op !== 'expire')
    await enforce(ctx, actor, `Membership.${op}`, {
      kind: 'Membership',
      id,
      userId,
      group: group as unknown as Doc,
    });
  if (op !== 'expire') await expireIfDue(ctx, group, userId);
  let from: State = 'none';
  let created = false;
  const rows = rowsFor(op, roles);
  const obj = await ctx.store.systemPut(Membership, id, (doc) => {
    from = stateOf(doc);
    const row = rows.find((r) => r.from.includes(from));
    if (!row) throw forbiddenTransition(op, from, roles, group, userId);
    // Uses within a minute of the last recorded one change nothing (the proxy may call often).
    if (op === 'use' && Date.now() - timestampMs(String(doc?.LastUsed)) < USE_GRANULARITY_MS)
      return { doc: doc as Doc };
    const to = resolveTarget(row.to, group, from);
    if (row.to === 'SAME') {
      // Repeating a decision changes nothing, unless the membership lacks an approval to record.
      const approval = (doc?.Approval ?? {}) as Doc;
      const unapproved = timestampMs(String(approval.Time ?? ZERO_TIME)) === Number.NEGATIVE_INFINITY;
      if (!((op === 'add' || op === 'approve') && unapproved)) return { doc: doc as Doc };
    }
    const now = nowStamp();
    const by = changeBy(actor);
    // A membership that starts over (from none or expired) keeps nothing of a former episode.
    const fresh =
      from === 'none' || (from === 'expired' && (op === 'add' || op === 'request' || op === 'approve'));
    const next: Doc = fresh ? { GroupID: group.ID, UserID: userId } : { ...(doc as Doc) };
    created = from === 'none';
    next.State = to === 'deleted' ? 'removed' : to;
    const decision = { ByUserID: by.ByUserID, ByKeyID: by.ByKeyID, Time: now, Reason: reason };
    switch (op) {
      case 'request':
        next.Reason = reason;
        next.RequestTime = now;
        break;
      case 'add':
      case 'approve':
        // The decider's reason is the membership's reason unless the user gave one when asking.
        if (!next.Reason) next.Reason = reason;
        next.Approval = decision;
        break;
      case 'use':
        next.LastUsed = now;
        break;
      case 'reject':
        // A rejection voids any earlier approval: after unreject, someone must approve again.
        next.Approval = undefined;
        next.Rejection = decision;
        break;
      case 'unreject':
        next.Rejection = undefined;
        break;
    }
    if (next.State === 'active' && from !== 'active') next.ActivateTime = now;
    next.LastChange = { Op: op, FromState: from, ...by, Time: now, Reason: reason };
    return { doc: next };
  });
  if (obj && obj.doc.State === 'removed') {
    // Second step of a removal: delete the object, if nobody re-added the user in between.
    await ctx.store.systemPut(Membership, id, (doc) =>
      doc?.State === 'removed' ? null : doc ? { doc } : null,
    );
    return { obj: undefined, from, created: false };
  }
  return { obj, from, created };
}

/** Expires the membership now if the group's ExpireUnusedDays says it is due. Returns true if it did. */
export async function expireIfDue(
  ctx: ServiceContext,
  group: GroupSettings,
  userId: string,
): Promise<boolean> {
  const current = await ctx.store.get(Membership, membershipId(group.ID, userId));
  if (!current || !expiryDue(group, current.doc)) return false;
  let did = false;
  await ctx.store.systemPut(Membership, current.id, (doc) => {
    // Re-checked inside the transaction: a concurrent use may have renewed it.
    if (!doc || !expiryDue(group, doc)) return doc ? { doc } : null;
    did = true;
    const now = nowStamp();
    return {
      doc: {
        ...doc,
        State: 'expired',
        LastChange: {
          Op: 'expire',
          FromState: 'active',
          ByUserID: '',
          ByKeyID: '',
          Via: 'system',
          Time: now,
          Reason: `not used for ${group.ExpireUnusedDays} days`,
        },
      },
    };
  });
  return did;
}
