import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { User } from '../../../objects/user.js';
import type { Doc } from '../../../schema/fields.js';
import { newId } from '../../../store/objects.js';
import type { ServiceContext } from '../../../store/service.js';

/** A browser or installed web app that registered a Web Push subscription (`MobileDevices`). */
export interface MobileDevice {
  ID: string;
  Name: string;
  Endpoint: string;
  /** The subscription's keys: P-256 public key and auth secret, base64url. */
  P256dh: string;
  Auth: string;
  CreateTime: string;
}

/**
 * A sign-in waiting for approval on a device (`MobileChallenges`): the SHA-256 of the secret pushed
 * to the devices, the session that asked, the number shown on its page (number matching), expiry.
 */
export interface Challenge {
  Hash: string;
  SessionID: string;
  Number: number;
  Time: string;
  Expires: number;
  Email: string;
  Browser: string;
  Address: string;
}

export const MAX_DEVICES = 10;
export const CHALLENGE_TTL_MS = 2 * 60_000;

export const devicesOf = (secret: Doc): MobileDevice[] =>
  Array.isArray(secret.MobileDevices) ? (secret.MobileDevices as unknown as MobileDevice[]) : [];
export const challengesOf = (secret: Doc): Challenge[] =>
  Array.isArray(secret.MobileChallenges) ? (secret.MobileChallenges as unknown as Challenge[]) : [];

const digest = (s: string) => createHash('sha256').update(s).digest();

/** `<user ID>.<secret>`: what the push carries and the device sends back. */
export function newToken(userId: string) {
  const secret = randomBytes(32).toString('base64url');
  return { token: `${userId}.${secret}`, hash: digest(secret).toString('base64url') };
}
const TOKEN = /^([a-z0-9]{1,64})\.([A-Za-z0-9_-]{43})$/;
export function parseToken(token: string) {
  const m = TOKEN.exec(token);
  return m ? { userId: m[1] as string, secret: m[2] as string } : undefined;
}

/** Two digits, 10 to 99: what the person types on the device. */
export const newNumber = () => randomInt(10, 100);

export function findChallenge(secret: Doc, given: string, now = Date.now()): Challenge | undefined {
  const want = digest(given);
  let hit: Challenge | undefined;
  for (const c of challengesOf(secret)) {
    if (c.Expires <= now) continue;
    const have = Buffer.from(c.Hash, 'base64url');
    if (have.length === want.length && timingSafeEqual(have, want)) hit = c;
  }
  return hit;
}

/** The session's one pending challenge replaces any earlier one of that session. */
export async function putChallenge(ctx: ServiceContext, userId: string, c: Challenge) {
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const now = Date.now();
    const rest = challengesOf(s).filter((x) => x.Expires > now && x.SessionID !== c.SessionID);
    return { doc, secret: { ...s, MobileChallenges: [...rest, c] as unknown as Doc[] } };
  });
}

/** Removes the challenge matching `given` in the same write that finds it (works once). */
export async function spendChallenge(ctx: ServiceContext, userId: string, given: string) {
  let spent: Challenge | undefined;
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const now = Date.now();
    spent = findChallenge(s, given, now);
    const rest = challengesOf(s).filter((x) => x.Expires > now && x !== spent);
    return { doc, secret: { ...s, MobileChallenges: rest as unknown as Doc[] } };
  });
  return spent;
}

export async function dropChallenges(ctx: ServiceContext, userId: string, sessionId: string) {
  await ctx.store.systemPut(User, userId, (doc, s) =>
    doc
      ? {
          doc,
          secret: {
            ...s,
            MobileChallenges: challengesOf(s).filter((x) => x.SessionID !== sessionId) as unknown as Doc[],
          },
        }
      : null,
  );
}

export async function addDevice(
  ctx: ServiceContext,
  userId: string,
  d: Omit<MobileDevice, 'ID' | 'CreateTime'>,
): Promise<MobileDevice | 'full'> {
  let out: MobileDevice | 'full' = 'full';
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    // The same subscription registered again replaces itself.
    const list = devicesOf(s).filter((x) => x.Endpoint !== d.Endpoint);
    if (list.length >= MAX_DEVICES) return { doc };
    const device: MobileDevice = { ...d, ID: newId(), CreateTime: new Date().toISOString() };
    out = device;
    return { doc, secret: { ...s, MobileDevices: [...list, device] as unknown as Doc[] } };
  });
  return out;
}

export async function removeDevices(ctx: ServiceContext, userId: string, ids: readonly string[]) {
  let removed = 0;
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const list = devicesOf(s);
    const kept = list.filter((x) => !ids.includes(x.ID));
    removed = list.length - kept.length;
    return { doc, secret: { ...s, MobileDevices: kept as unknown as Doc[] } };
  });
  return removed;
}
