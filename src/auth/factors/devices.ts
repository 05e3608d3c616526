import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { ServiceContext } from '../../store/service.js';
import { authQuery } from '../session/db.js';
import { TRUSTED_DEVICES } from '../throttle.js';

/**
 * Devices where a user has completed a sign-in (reached the level their factors can reach). Such
 * a device gets its own regulation counters (throttle.ts), so guesses made from anywhere else
 * cannot hold up the owner there. A device cookie is chosen by the client, so a device ID counts
 * only when the server has recorded a completed sign-in of this very user with it.
 *
 * Recorded in the trusted_devices table as (user, tag, last sign-in time): tags, not the IDs
 * themselves. Not in the User object: a sign-in on a new device is not a change of the user, so
 * it must not change the User's ETag or ModifyTime, nor tell event subscribers that this user
 * just signed in somewhere new. The numbers: TRUSTED_DEVICES in throttle.ts.
 */

type Ctx = Pick<ServiceContext, 'db'>;

/** The stored form of a device ID (not the ID itself, which is a cookie value). */
export const deviceTag = (deviceId: string) =>
  createHash('sha256').update(`gatehouse-device:${deviceId}`).digest('base64url').slice(0, 22);

/** The device's tag when this user has completed a sign-in on it (and not too long ago), else undefined. */
export async function trustedTag(
  ctx: Ctx,
  userId: string,
  deviceId: string | undefined,
): Promise<string | undefined> {
  if (!deviceId) return undefined;
  const tag = deviceTag(deviceId);
  const { rows } = await authQuery<{ last_used: number | string }, { user: string; tag: string }>(
    ctx,
    'devices.lastUsed',
    (db, v) =>
      db
        .selectFrom('trusted_devices')
        .select('last_used')
        .where('user_id', '=', v.user)
        .where('tag', '=', v.tag),
    { user: userId, tag },
  );
  const seen = rows[0] === undefined ? undefined : Number(rows[0].last_used);
  return seen !== undefined && Date.now() - seen < TRUSTED_DEVICES.forgetMs ? tag : undefined;
}

/**
 * Records a completed sign-in of the user on this device. One statement when it was recorded
 * less than TRUSTED_DEVICES.refreshMs ago (nothing is written); otherwise the time is written and
 * the user keeps only the TRUSTED_DEVICES.max most recently used devices not yet forgotten. Other
 * users' forgotten devices go with the sweep of ended sessions (sweepEnded in session/rows.ts).
 */
export async function rememberDevice(ctx: Ctx, userId: string, deviceId: string): Promise<void> {
  const now = Date.now();
  const written = await authQuery(
    ctx,
    'devices.remember',
    (db, v) =>
      db
        .insertInto('trusted_devices')
        .values({ user_id: v.user, tag: v.tag, last_used: v.now })
        .onConflict((oc) =>
          oc
            .columns(['user_id', 'tag'])
            .doUpdateSet({ last_used: v.now })
            .where('trusted_devices.last_used', '<=', v.stale),
        ),
    { user: userId, tag: deviceTag(deviceId), now, stale: now - TRUSTED_DEVICES.refreshMs },
  );
  if (written.affected === 0) return;
  await authQuery(
    ctx,
    'devices.prune',
    (_, v) => sql`
      DELETE FROM trusted_devices WHERE user_id = ${v.user} AND (last_used <= ${v.forgotten} OR tag NOT IN (
        SELECT tag FROM trusted_devices WHERE user_id = ${v.user} ORDER BY last_used DESC, tag LIMIT ${sql.lit(TRUSTED_DEVICES.max)}))`,
    { user: userId, forgotten: now - TRUSTED_DEVICES.forgetMs },
  );
}
