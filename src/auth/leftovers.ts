import { sql } from 'kysely';
import { sweepKeys } from '../core/keysweep.js';
import { User } from '../objects/user.js';
import { jobsOf, type ServiceContext } from '../store/service.js';
import { linkedUserIds, releaseLinksOf } from './factors/oauth2rp/store.js';
import { authDb } from './session/db.js';
import { deleteUserSessions } from './session/sessions.js';

/** How often the service removes what deleted users left in the sign-in tables. */
export const DELETED_USER_SWEEP_INTERVAL_MS = 10 * 60 * 1000;
/** User IDs read per page: the sweep never holds a whole table in memory. */
const PAGE = 500;

/** What one sweep removed, in rows per table. */
export interface LeftoversRemoved {
  federatedLinks: number;
  trustedDevices: number;
  sessions: number;
}

/** Up to `limit` distinct user IDs after `after` in a table of rows that name a user, in order. */
const userIdsIn =
  (ctx: ServiceContext, table: 'trusted_devices' | 'sessions') => async (after: string, limit: number) => {
    const { rows } = await sql<{ user_id: string }>`
      SELECT DISTINCT user_id FROM ${sql.table(table)} WHERE user_id > ${after} ORDER BY user_id LIMIT ${limit}`.execute(
      ctx.db.kysely,
    );
    return rows.map((r) => r.user_id);
  };

/**
 * Deleting a user leaves rows that name it in tables of their own, outside the object store:
 * federated links (the provider's issuer, the user's subject there and the address it gave),
 * trusted devices (kept 400 days) and sessions (until they expire). Personal data kept for nobody:
 * this sweep deletes them. User IDs are never reused and whether a user exists is read from the
 * database (a page of IDs in one statement), so a user found missing stays missing and no live
 * user's rows are ever taken. Sessions without a user (before the e-mail step) are not named.
 */
export async function sweepDeletedUsers(ctx: ServiceContext, page = PAGE): Promise<LeftoversRemoved> {
  // One statement per page: which of these users still exist.
  const gone = async (userIds: string[]) => {
    const live = await ctx.store.existing(User, userIds);
    return userIds.filter((id) => !live.has(id));
  };
  const federatedLinks = await sweepKeys({
    page,
    list: (after, limit) => linkedUserIds(ctx, after, limit),
    gone,
    drop: (userId) => releaseLinksOf(ctx, userId),
  });
  const trustedDevices = await sweepKeys({
    page,
    list: userIdsIn(ctx, 'trusted_devices'),
    gone,
    drop: async (userId) =>
      Number(
        (await authDb(ctx).deleteFrom('trusted_devices').where('user_id', '=', userId).executeTakeFirst())
          .numDeletedRows,
      ),
  });
  const sessions = await sweepKeys({
    page,
    list: userIdsIn(ctx, 'sessions'),
    gone,
    // Through the sessions module: its signal ends whatever still follows these sessions.
    drop: (userId) => deleteUserSessions(ctx, userId),
  });
  return { federatedLinks, trustedDevices, sessions };
}

/** Runs the sweep every DELETED_USER_SWEEP_INTERVAL_MS among the service's background jobs. */
export function scheduleDeletedUserSweep(ctx: ServiceContext) {
  jobsOf(ctx).every('deleted user sweep', DELETED_USER_SWEEP_INTERVAL_MS, async () => {
    const removed = await sweepDeletedUsers(ctx);
    if (removed.federatedLinks + removed.trustedDevices + removed.sessions > 0)
      ctx.logger.info(removed, 'what deleted users left in the sign-in tables was removed');
  });
}
