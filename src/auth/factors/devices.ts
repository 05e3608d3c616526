import { createHash } from 'node:crypto';
import { User } from '../../objects/user.js';
import type { Doc } from '../../schema/fields.js';
import type { ServiceContext } from '../../store/service.js';
import { TRUSTED_DEVICES } from '../throttle.js';

/**
 * Devices where a user has completed a sign-in (reached the level their factors can reach). Such
 * a device gets its own regulation counters (throttle.ts), so guesses made from anywhere else
 * cannot hold up the owner there. A device cookie is chosen by the client, so a device ID counts
 * only when the server has recorded a completed sign-in of this very user with it; recorded in
 * the user's hidden state as tag -> last sign-in time (tags, not the IDs themselves). The numbers:
 * TRUSTED_DEVICES in throttle.ts.
 */

/** The stored form of a device ID (not the ID itself, which is a cookie value). */
export const deviceTag = (deviceId: string) =>
  createHash('sha256').update(`gatehouse-device:${deviceId}`).digest('base64url').slice(0, 22);

function trustedDevices(secret: Doc): Record<string, number> {
  const v = secret.TrustedDevices;
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, number>) : {};
}

/** The device's tag when this user has completed a sign-in on it, else undefined. */
export function trustedTag(secret: Doc, deviceId: string | undefined, now = Date.now()): string | undefined {
  if (!deviceId) return undefined;
  const tag = deviceTag(deviceId);
  const seen = trustedDevices(secret)[tag];
  return typeof seen === 'number' && now - seen < TRUSTED_DEVICES.forgetMs ? tag : undefined;
}

/**
 * Records a completed sign-in of the user on this device; no write when recorded recently
 * (`secret`: the user's hidden state as just read, to skip reading it again).
 */
export async function rememberDevice(
  ctx: Pick<ServiceContext, 'store'>,
  userId: string,
  deviceId: string,
  secret?: Doc,
): Promise<void> {
  const tag = deviceTag(deviceId);
  const now = Date.now();
  const seen = trustedDevices(secret ?? (await ctx.store.getSecret(User, userId)))[tag];
  if (typeof seen === 'number' && now - seen < TRUSTED_DEVICES.refreshMs) return;
  await ctx.store.systemPut(User, userId, (doc, secret) => {
    if (!doc) return null;
    const kept = Object.entries({ ...trustedDevices(secret), [tag]: now })
      .filter(([, t]) => typeof t === 'number' && now - t < TRUSTED_DEVICES.forgetMs)
      .sort((a, b) => b[1] - a[1])
      .slice(0, TRUSTED_DEVICES.max);
    return { doc, secret: { ...secret, TrustedDevices: Object.fromEntries(kept) } };
  });
}
