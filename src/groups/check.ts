import { userUsable } from '../auth/apikeys.js';
import { ApiError } from '../core/errors.js';
import { isLocalReturnPath } from '../core/returnurl.js';
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import { TENANT_ID, Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import { membershipCountsIn } from '../policy/memberships.js';
import type { ServiceContext } from '../store/service.js';
import { applyOp, expireIfDue, expiryDue, groupSettings, type ReportedLocation } from './lifecycle.js';

/** One entry of an access-check result (spec "AccessCheck result"). */
export interface CheckEntry {
  GroupID: string;
  /** 200: active member; 403: not (Location says where to fix it); 404: no such group. */
  StatusCode: number;
  /** The access-request page for this group, present only when the user can act there. */
  Location?: string;
}

export interface CheckResult {
  /** The check is satisfied (StatusCode 200). */
  Satisfied: boolean;
  /** 200 when the check is satisfied, else 403. */
  StatusCode: 200 | 403;
  /** The Location of the first entry that needs action, when not satisfied. */
  Location?: string;
  Results: CheckEntry[];
}

export const MAX_CHECK_GROUPS = 64;
export const MAX_NEXT = 2048;

/** Where the access-request pages are: Tenant.SigninURL, else server.signinurl, else /signin here. */
export async function signinBase(ctx: ServiceContext): Promise<string> {
  const tenant = await ctx.store.get(Tenant, TENANT_ID);
  const url = String(tenant?.doc.SigninURL ?? '') || ctx.config.server.signinurl || '/signin';
  return url.replace(/\/+$/, '');
}

/**
 * Is `next` a URL we may send a browser to: an absolute http(s) URL on an allowed origin, or a
 * path on this service as the project's one return-path check reads it (src/core/returnurl.ts:
 * "/%2f%2fevil.example" or "/%09/evil.example" are one decoding away from another origin)?
 * Returns the normalized URL or undefined.
 */
export function allowedNext(next: string, origins: readonly string[]): string | undefined {
  if (next === '' || next.length > MAX_NEXT) return undefined;
  if (next.startsWith('/')) return isLocalReturnPath(next) ? next : undefined;
  let u: URL;
  try {
    u = new URL(next);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return undefined;
  if (u.username !== '' || u.password !== '') return undefined;
  return origins.includes(u.origin) ? u.href : undefined;
}

/** The access-request page of a group, carrying `next` when given. */
export const requestPage = (base: string, groupId: string, next?: string) =>
  `${base}/groups/${encodeURIComponent(groupId)}${next ? `?next=${encodeURIComponent(next)}` : ''}`;

/**
 * The membership check the proxy's access-check endpoint asks over the back channel.
 * - op "or": stops at the first group the user is an active member of (later groups are absent);
 *   "and": checks every group, no short-circuit.
 * - A membership counts when it is active, not overdue for expiry (an overdue one is expired now:
 *   expiry is applied lazily here and by a periodic sweep), and the caller's session integrity
 *   level (default 0) reaches the group's IntegrityLevel, and the session's reported location is
 *   inside one of the group's LocationRegions when it has any (no location known: not inside).
 * - `next` is carried in every Location (the page checks it against the allow-list).
 * - Location is absolute when Tenant.SigninURL or server.signinurl is set; otherwise it is the
 *   path /signin/groups/:id on this service, prefixed with `origin` when the caller gives it
 *   (the service's own origin as the browser reaches it).
 * Unknown user: 404. Unknown group: an entry with StatusCode 404 (the check is not satisfied).
 */
export async function checkMembership(
  ctx: ServiceContext,
  userId: string,
  groupIds: readonly string[],
  op: 'and' | 'or',
  opts: { next?: string; integrityLevel?: number; origin?: string; location?: ReportedLocation } = {},
): Promise<CheckResult> {
  const ids = [...new Set(groupIds)];
  if (ids.length === 0)
    throw new ApiError('BadRequest', 'name at least one group to check', { field: 'group' });
  if (ids.length > MAX_CHECK_GROUPS)
    throw new ApiError('BadRequest', `at most ${MAX_CHECK_GROUPS} groups per check`, { field: 'group' });
  // `next` is carried as given: the access-request page checks it against the allow-list before
  // sending anyone there (and says so when it is not allowed), so a misconfigured origin shows up
  // on the page instead of failing every access check.
  const next = opts.next === undefined || opts.next === '' ? undefined : opts.next;
  if (next !== undefined && next.length > MAX_NEXT)
    throw new ApiError('InvalidField', `next is longer than ${MAX_NEXT} characters`, { field: 'next' });
  const user = await ctx.store.get(User, userId);
  if (!user) throw new ApiError('NotFound', `User ${userId} does not exist`);
  const usable = userUsable(user.doc);
  const level = opts.integrityLevel ?? 0;
  let base = await signinBase(ctx);
  if (base.startsWith('/') && opts.origin) base = `${opts.origin.replace(/\/+$/, '')}${base}`;
  const results: CheckEntry[] = [];
  for (const gid of ids) {
    const g = await ctx.store.get(Group, gid);
    if (!g) {
      results.push({ GroupID: gid, StatusCode: 404 });
      continue;
    }
    const group = groupSettings(g.doc);
    let m = await ctx.store.get(Membership, membershipId(gid, userId));
    if (m && expiryDue(group, m.doc)) {
      await expireIfDue(ctx, group, userId);
      m = await ctx.store.get(Membership, membershipId(gid, userId));
    }
    // The one membership rule (src/policy/memberships.ts), as the App checks and the OpenID provider count.
    const ok =
      usable &&
      membershipCountsIn(g.doc, m?.doc, { level, ...(opts.location ? { location: opts.location } : {}) });
    if (ok) {
      results.push({ GroupID: gid, StatusCode: 200 });
      if (op === 'or') break;
    } else if (!usable) {
      // A disabled or suspended user can do nothing about it on the request page.
      results.push({ GroupID: gid, StatusCode: 403 });
    } else {
      results.push({ GroupID: gid, StatusCode: 403, Location: requestPage(base, gid, next) });
    }
  }
  const satisfied =
    op === 'or' ? results.some((r) => r.StatusCode === 200) : results.every((r) => r.StatusCode === 200);
  if (satisfied) return { Satisfied: true, StatusCode: 200, Results: results };
  const location = results.find((r) => r.Location)?.Location;
  return location
    ? { Satisfied: false, StatusCode: 403, Location: location, Results: results }
    : { Satisfied: false, StatusCode: 403, Results: results };
}

/**
 * Records a use of an active membership on behalf of the proxy back channel (the service itself
 * acts: LastChange.Via "system"). At most one write per membership per minute; a membership that
 * is no longer active is left alone.
 */
export async function markUsed(ctx: ServiceContext, groupId: string, userId: string): Promise<void> {
  const g = await ctx.store.get(Group, groupId);
  if (!g) return;
  try {
    await applyOp(ctx, {
      op: 'use',
      group: groupSettings(g.doc),
      userId,
      actor: 'system',
      roles: new Set(['system']),
      reason: 'access check',
    });
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 409)) throw e;
  }
}
