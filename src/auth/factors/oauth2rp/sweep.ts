import { sweepKeys } from '../../../core/keysweep.js';
import { User } from '../../../objects/user.js';
import { jobsOf, type ServiceContext } from '../../../store/service.js';
import { linkedUserIds, releaseLinksOf } from './store.js';

/** How often the service deletes the federated links of users who were deleted. */
export const LINK_SWEEP_INTERVAL_MS = 10 * 60 * 1000;
/** User IDs read per page: the sweep never holds the whole table in memory. */
const PAGE = 500;

/**
 * Deleting a user leaves its rows in federated_links: the provider's issuer, the user's subject
 * there and the address it gave, personal data kept for nobody. A sign-in through such an
 * identity releases its row (resolveUser); this sweep removes the rest. User IDs are never reused
 * and a missing user is read from the database every time (the row cache holds no absences), so a
 * user found missing stays missing and no live user's link is ever taken. Returns how many went.
 */
export function sweepLinksOfDeletedUsers(ctx: ServiceContext, page = PAGE): Promise<number> {
  return sweepKeys({
    page,
    list: (after, limit) => linkedUserIds(ctx, after, limit),
    gone: async (userId) => !(await ctx.store.get(User, userId)),
    drop: (userId) => releaseLinksOf(ctx, userId),
  });
}

/** Runs the sweep every LINK_SWEEP_INTERVAL_MS among the service's background jobs (src/core/jobs.ts). */
export function scheduleLinkSweep(ctx: ServiceContext) {
  jobsOf(ctx).every('federated link sweep', LINK_SWEEP_INTERVAL_MS, async () => {
    const removed = await sweepLinksOfDeletedUsers(ctx);
    if (removed > 0) ctx.logger.info({ removed }, 'federated links of deleted users removed');
  });
}
