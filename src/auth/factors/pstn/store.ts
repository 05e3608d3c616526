import { randomInt } from 'node:crypto';
import { User } from '../../../objects/user.js';
import type { Doc } from '../../../schema/fields.js';
import { newId } from '../../../store/objects.js';
import type { ServiceContext } from '../../../store/service.js';
import { hashSecret, verifySecret } from '../secrets.js';
import type { PstnMode } from './provider.js';

/** A phone of a user (PSTNDevice): kept in the user's hidden state (`PSTNDevices`). */
export interface PstnDevice {
  ID: string;
  /** E.164: + and 7 to 15 digits. */
  Number: string;
  Mode: PstnMode;
  Verified: boolean;
  CreateTime: string;
}

/**
 * A code sent to a device, waiting (`PSTNCodes`): its argon2id hash only, for which purpose
 * (signing in the session that asked, or verifying the number), until when. One per device and
 * purpose: a new one replaces the old.
 */
interface PendingCode {
  DeviceID: string;
  Purpose: 'signin' | 'verify';
  SessionID: string;
  Hash: string;
  Expires: number;
}

export const E164 = /^\+[1-9][0-9]{6,14}$/;
export const MAX_DEVICES = 5;
/** How long a code works. */
export const CODE_TTL_MS = 5 * 60_000;
export const CODE_DIGITS = 6;

export const devicesOf = (secret: Doc): PstnDevice[] =>
  Array.isArray(secret.PSTNDevices) ? (secret.PSTNDevices as unknown as PstnDevice[]) : [];
const codesOf = (secret: Doc): PendingCode[] =>
  Array.isArray(secret.PSTNCodes) ? (secret.PSTNCodes as unknown as PendingCode[]) : [];

/** "••••••67": enough to tell one's phones apart on a sign-in page, not to learn the number. */
export const maskedNumber = (n: string) => `${'•'.repeat(Math.max(0, n.length - 3))}${n.slice(-2)}`;

export const newCode = () => String(randomInt(0, 10 ** CODE_DIGITS)).padStart(CODE_DIGITS, '0');

/** Adds a device (unverified); 'duplicate' when the user has the number already, 'full' at MAX_DEVICES. */
export async function addDevice(
  ctx: ServiceContext,
  userId: string,
  number: string,
  mode: PstnMode,
): Promise<PstnDevice | 'duplicate' | 'full'> {
  let out: PstnDevice | 'duplicate' | 'full' = 'full';
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const list = devicesOf(s);
    if (list.some((d) => d.Number === number)) {
      out = 'duplicate';
      return { doc };
    }
    if (list.length >= MAX_DEVICES) return { doc };
    const d: PstnDevice = {
      ID: newId(),
      Number: number,
      Mode: mode,
      Verified: false,
      CreateTime: new Date().toISOString(),
    };
    out = d;
    return { doc, secret: { ...s, PSTNDevices: [...list, d] as unknown as Doc[] } };
  });
  return out;
}

/** Removes a device and its codes; false when there was none. */
export async function removeDevice(ctx: ServiceContext, userId: string, id: string): Promise<boolean> {
  let found = false;
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    found = devicesOf(s).some((d) => d.ID === id);
    if (!found) return { doc };
    return {
      doc,
      secret: {
        ...s,
        PSTNDevices: devicesOf(s).filter((d) => d.ID !== id) as unknown as Doc[],
        PSTNCodes: codesOf(s).filter((c) => c.DeviceID !== id) as unknown as Doc[],
      },
    };
  });
  return found;
}

/** Stores the hash of a new code for a device and purpose (replacing the previous one). */
export async function putCode(
  ctx: ServiceContext,
  userId: string,
  code: Omit<PendingCode, 'Hash' | 'Expires'>,
  plain: string,
): Promise<void> {
  const hash = await hashSecret(plain);
  const now = Date.now();
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const rest = codesOf(s).filter(
      (c) => c.Expires > now && !(c.DeviceID === code.DeviceID && c.Purpose === code.Purpose),
    );
    return {
      doc,
      secret: {
        ...s,
        PSTNCodes: [...rest, { ...code, Hash: hash, Expires: now + CODE_TTL_MS }] as unknown as Doc[],
      },
    };
  });
}

/** Drops the pending code of a device and purpose (cancel; a message that could not be sent). */
export async function dropCode(
  ctx: ServiceContext,
  userId: string,
  deviceId: string,
  purpose: PendingCode['Purpose'],
): Promise<void> {
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const rest = codesOf(s).filter((c) => !(c.DeviceID === deviceId && c.Purpose === purpose));
    return { doc, secret: { ...s, PSTNCodes: rest as unknown as Doc[] } };
  });
}

/**
 * Checks a code against the live one of this device, purpose and session, and spends it on a
 * match (in the same write that finds it still there: it works once). A wrong code leaves it
 * (regulation bounds the guesses); an unknown device or no live code verifies against a dummy
 * hash, so the answer takes as long.
 */
export async function spendCode(
  ctx: ServiceContext,
  userId: string,
  match: { DeviceID: string; Purpose: PendingCode['Purpose']; SessionID: string },
  given: string,
): Promise<boolean> {
  const now = Date.now();
  const secret = await ctx.store.getSecret(User, userId);
  const pending = codesOf(secret).find(
    (c) =>
      c.DeviceID === match.DeviceID &&
      c.Purpose === match.Purpose &&
      c.SessionID === match.SessionID &&
      c.Expires > now,
  );
  const ok = /^[0-9]{6}$/.test(given) && (await verifySecret(pending?.Hash, given));
  if (!ok || !pending) return false;
  let spent = false;
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const list = codesOf(s);
    spent = list.some((c) => c.Hash === pending.Hash);
    return {
      doc,
      secret: { ...s, PSTNCodes: list.filter((c) => c.Hash !== pending.Hash) as unknown as Doc[] },
    };
  });
  return spent;
}

/** Marks a device verified. */
export async function markVerified(ctx: ServiceContext, userId: string, id: string): Promise<void> {
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const list = devicesOf(s).map((d) => (d.ID === id ? { ...d, Verified: true } : d));
    return { doc, secret: { ...s, PSTNDevices: list as unknown as Doc[] } };
  });
}
