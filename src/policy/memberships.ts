import { insideRegions } from '../core/regions.js';
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import { type Doc, timestampMs } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';

const DAY_MS = 86_400_000;

/** A session's reported position (POST /auth/location), as group location checks read it. */
export interface ReportedLocation {
  Latitude: number;
  Longitude: number;
}

/**
 * The session a membership is counted for. `level` undefined: no session at all (provisioning,
 * where an account follows the membership whatever session its holder later uses), so the
 * group's session requirements (IntegrityLevel, LocationRegions) do not apply; an API key counts
 * as level 0.
 */
export interface CountedFor {
  level?: number;
  location?: ReportedLocation;
  /**
   * No browser is present to report a position (the OpenID provider's token and userinfo
   * endpoints): the group's LocationRegions were checked when the person signed in to the App,
   * with the session's position, and are not checked again; the level still is.
   */
  locationChecked?: boolean;
  now?: number;
}

/** Is an active membership due to expire (ExpireUnusedDays after its last use or activation)? */
export function membershipOverdue(group: Doc, m: Doc | undefined, now = Date.now()): boolean {
  const days = Number(group.ExpireUnusedDays ?? 0);
  if (m?.State !== 'active' || !(days > 0)) return false;
  const ref = Math.max(timestampMs(String(m.LastUsed)), timestampMs(String(m.ActivateTime)));
  if (!Number.isFinite(ref)) return false;
  return now - ref >= days * DAY_MS;
}

/** Does the group's location requirement hold for this position (none known: only if it has none)? */
export function locationHolds(group: Doc, at: ReportedLocation | undefined): boolean {
  const regions = Array.isArray(group.LocationRegions) ? (group.LocationRegions as string[]) : [];
  return regions.length === 0 || (at !== undefined && insideRegions(at.Latitude, at.Longitude, regions));
}

/**
 * Whether a membership counts, as the one rule every access decision uses (the proxy's back
 * channel, the OpenID provider, approver groups, provisioning): the membership is active and not
 * overdue for expiry, and the session reaches the group's IntegrityLevel and is inside one of its
 * LocationRegions when it has any (see CountedFor for "no session").
 */
export function membershipCountsIn(group: Doc, m: Doc | undefined, at: CountedFor = {}): boolean {
  if (m?.State !== 'active' || membershipOverdue(group, m, at.now)) return false;
  if (at.level === undefined) return true;
  if (at.level < Number(group.IntegrityLevel ?? 0)) return false;
  return at.locationChecked === true || locationHolds(group, at.location);
}

/** membershipCountsIn, reading the group and the membership. A missing group counts for nothing. */
export async function membershipCounts(
  ctx: Pick<ServiceContext, 'store'>,
  groupId: string,
  userId: string,
  at: CountedFor = {},
): Promise<boolean> {
  if (groupId === '' || userId === '') return false;
  const g = await ctx.store.get(Group, groupId);
  if (!g) return false;
  const m = await ctx.store.get(Membership, membershipId(groupId, userId));
  return membershipCountsIn(g.doc, m?.doc, at);
}
