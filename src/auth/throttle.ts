import { ApiError } from '../core/errors.js';
import type { ServiceContext } from '../store/context.js';
import { authDb } from './session/db.js';

/**
 * Brute-force regulation for password, PIN and code attempts (docs/signin.md, "Regulation").
 * Counters live in the database, so every instance sees the same numbers. An attempt is charged
 * BEFORE the secret is checked (compare-and-swap on the counter), so parallel guesses cannot slip
 * past the limit; a correct answer then clears that factor's charge only. Any failure of this
 * store refuses the attempt (fails closed, 503).
 *
 * Each attempt is charged to two counters: the source address, and the (user, factor, device)
 * counter. The device part is the device ID only for a device where this user has completed a
 * sign-in before (src/auth/factors/devices.ts); every other device shares the user's
 * "untrusted" counter for that factor. So guesses from elsewhere never hold up the owner's own
 * device, one factor's success never refunds another's failures, and a client cannot pick a
 * fresh counter by sending a new device cookie.
 */
export interface ThrottlePolicy {
  /** Failures allowed without delay. */
  free: number;
  /** Delay after the first failure beyond `free`; doubles with each further failure. */
  baseMs: number;
  maxMs: number;
  /** Counters are forgotten after this long without a failure. */
  windowMs: number;
}

/** Each (user, factor, device) counter: trusted devices one each, all other devices one together. */
export const USER_POLICY: ThrottlePolicy = {
  free: 3,
  baseMs: 2_000,
  maxMs: 15 * 60_000,
  windowMs: 24 * 3600_000,
};
export const ADDRESS_POLICY: ThrottlePolicy = {
  free: 20,
  baseMs: 1_000,
  maxMs: 15 * 60_000,
  windowMs: 3600_000,
};

/**
 * Devices where a user completed a sign-in (devices.ts): how many a user keeps (signing in on one
 * more forgets the least recently used), after how long unused one is forgotten (the device
 * cookie's own lifetime), and how often its last-use time is rewritten at most.
 */
export const TRUSTED_DEVICES = { max: 10, forgetMs: 400 * 86400_000, refreshMs: 7 * 86400_000 };

export interface Charge {
  key: string;
  policy: ThrottlePolicy;
}

/**
 * The counter of one factor of one user, from one trusted device (its tag, see devices.ts) or,
 * with `device` undefined, from all devices not trusted for this user.
 */
export const factorKey = (userId: string, factor: string, device: string | undefined): Charge => ({
  key: `user:${userId}:${factor}:${device === undefined ? 'untrusted' : `dev:${device}`}`,
  policy: USER_POLICY,
});
export const addressKey = (addr: string): Charge => ({ key: `addr:${addr}`, policy: ADDRESS_POLICY });

export function delayAfter(failures: number, p: ThrottlePolicy): number {
  if (failures <= p.free) return 0;
  return Math.min(p.baseMs * 2 ** Math.min(failures - p.free - 1, 30), p.maxMs);
}

function tooMany(next: number): ApiError {
  // HTTP-dates have whole seconds: round up so a client waiting until then is accepted.
  const when = new Date(Math.ceil(next / 1000) * 1000);
  return new ApiError(
    'TooManyRequests',
    `too many unsuccessful attempts; try again after ${when.toISOString()}`,
    {
      headers: {
        'X-Next-Attempt': when.toUTCString(),
        'Retry-After': String(Math.max(1, Math.ceil((next - Date.now()) / 1000))),
      },
    },
  );
}

async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw new ApiError(
      'Unavailable',
      'sign-in attempts cannot be counted right now, so none are accepted; try again later',
    );
  }
}

/** Refuses (429) when any counter is in its back-off; otherwise counts one more attempt on each. */
export async function chargeAttempt(ctx: Pick<ServiceContext, 'db'>, charges: Charge[]): Promise<void> {
  await guarded(async () => {
    const db = authDb(ctx);
    const now = Date.now();
    for (const c of charges) {
      const row = await db
        .selectFrom('auth_throttle')
        .selectAll()
        .where('key', '=', c.key)
        .executeTakeFirst();
      if (row && Number(row.next_attempt) > now) throw tooMany(Number(row.next_attempt));
    }
    for (const c of charges) {
      for (let i = 0; ; i++) {
        if (i >= 20) throw new Error('throttle counter contended');
        await db
          .insertInto('auth_throttle')
          .values({ key: c.key, failures: 0, next_attempt: 0, last_failure: 0 })
          .onConflict((oc) => oc.column('key').doNothing())
          .execute();
        const row = await db
          .selectFrom('auth_throttle')
          .selectAll()
          .where('key', '=', c.key)
          .executeTakeFirst();
        // Another instance's correct answer (attemptSucceeded) deleted the counter between the
        // insert and the read: count again on a fresh one rather than failing (503) the loser of a race.
        if (!row) continue;
        const t = Date.now();
        if (Number(row.next_attempt) > t) throw tooMany(Number(row.next_attempt));
        const last = Number(row.last_failure);
        const failures = (t - last > c.policy.windowMs ? 0 : Number(row.failures)) + 1;
        const delay = delayAfter(failures, c.policy);
        const r = await db
          .updateTable('auth_throttle')
          .set({ failures, next_attempt: delay > 0 ? t + delay : 0, last_failure: t })
          .where('key', '=', c.key)
          .where('failures', '=', Number(row.failures))
          .where('last_failure', '=', last)
          .executeTakeFirst();
        if (Number(r.numUpdatedRows) === 1) break;
      }
    }
  });
}

/**
 * A correct answer: that factor's counter (for this device) is cleared, and the address gets its
 * charge back. Other factors' counters are untouched: a right password refunds no TOTP guess.
 */
export async function attemptSucceeded(ctx: Pick<ServiceContext, 'db'>, factor: Charge, address?: Charge) {
  await guarded(async () => {
    const db = authDb(ctx);
    await db.deleteFrom('auth_throttle').where('key', '=', factor.key).execute();
    if (address) {
      await db
        .updateTable('auth_throttle')
        .set((eb) => ({ failures: eb('failures', '-', 1) }))
        .where('key', '=', address.key)
        .where('failures', '>', 0)
        .execute();
    }
  });
}
