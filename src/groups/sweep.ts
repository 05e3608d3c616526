import { Group } from '../objects/group.js';
import { Membership } from '../objects/membership.js';
import { User } from '../objects/user.js';
import { jobsOf, type ServiceContext } from '../store/service.js';
import { expireIfDue, expiryDue, groupSettings, nowStamp } from './lifecycle.js';
import { iterateObjects } from './report.js';

/** How often the service looks for memberships to expire (ExpireUnusedDays) or orphaned ones. */
export const SWEEP_INTERVAL_MS = 10 * 60 * 1000;

export interface SweepResult {
  expired: number;
  removed: number;
}

/**
 * Expiry is applied in two ways: lazily (the membership check, every lifecycle operation and the
 * report treat an overdue membership as expired at once) and by this sweep, which writes the
 * "expired" state so that lists and the event stream show it. The sweep also deletes memberships
 * whose group or user no longer exists.
 */
export async function sweepMemberships(ctx: ServiceContext): Promise<SweepResult> {
  const result: SweepResult = { expired: 0, removed: 0 };
  const now = Date.now();
  const groups = new Map<string, ReturnType<typeof groupSettings> | null>();
  const users = new Map<string, boolean>();
  // Collect first, write after: writing while the list is being read would hold SQLite's one connection.
  const expire: { groupId: string; userId: string }[] = [];
  const orphans: string[] = [];
  for await (const m of iterateObjects(ctx, Membership, {})) {
    const gid = String(m.GroupID);
    const uid = String(m.UserID);
    if (!groups.has(gid)) {
      const g = await ctx.store.get(Group, gid);
      groups.set(gid, g ? groupSettings(g.doc) : null);
    }
    if (!users.has(uid)) users.set(uid, !!(await ctx.store.get(User, uid)));
    const g = groups.get(gid);
    if (!g || !users.get(uid)) orphans.push(String(m.ID));
    else if (expiryDue(g, m, now)) expire.push({ groupId: gid, userId: uid });
  }
  for (const { groupId, userId } of expire) {
    const g = groups.get(groupId);
    if (g && (await expireIfDue(ctx, g, userId))) result.expired++;
  }
  for (const id of orphans) {
    // Group and user IDs are never reused, so an orphan found above stays one. (No store reads in
    // here: on SQLite the write transaction holds the only connection.)
    let removed = false;
    await ctx.store.systemPut(Membership, id, (doc) => {
      removed = !!doc;
      return null;
    });
    if (removed) result.removed++;
  }
  return result;
}

/** Runs the sweep every SWEEP_INTERVAL_MS among the service's background jobs (src/core/jobs.ts). */
export function scheduleExpirySweep(ctx: ServiceContext) {
  jobsOf(ctx).every('membership sweep', SWEEP_INTERVAL_MS, async () => {
    const r = await sweepMemberships(ctx);
    if (r.expired + r.removed > 0) ctx.logger.info({ ...r, at: nowStamp() }, 'membership sweep');
  });
}
