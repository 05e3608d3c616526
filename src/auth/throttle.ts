import { type RawBuilder, sql } from 'kysely';
import { ApiError } from '../core/errors.js';
import type { ServiceContext } from '../store/service.js';
import { authDb, authQuery } from './session/db.js';

/**
 * Brute-force regulation for password, PIN and code attempts (docs/signin.md, "Regulation").
 * Counters live in the database, so every instance sees the same numbers. An attempt is charged
 * BEFORE the secret is checked (one atomic upsert per counter), so parallel guesses cannot slip
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

/**
 * The delay (ms) after `failures` counted failures, as SQL over an expression for that count: a
 * CASE over the few counts before the delay reaches its cap (the doubling of delayAfter, spelled
 * out, so neither backend needs a power function). Built from the policy's numbers only.
 */
function delaySql(p: ThrottlePolicy, failures: RawBuilder<number>): RawBuilder<number> {
  const steps: RawBuilder<unknown>[] = [];
  for (let f = p.free + 1; delayAfter(f, p) < p.maxMs; f++)
    steps.push(sql`WHEN ${failures} = ${sql.lit(f)} THEN ${sql.lit(delayAfter(f, p))}`);
  return sql<number>`(CASE WHEN ${failures} <= ${sql.lit(p.free)} THEN 0 ${sql.join(steps, sql` `)} ELSE ${sql.lit(p.maxMs)} END)`;
}

/** The upsert that charges one counter of policy `p` (chargeAttempt). */
function chargeSql(p: ThrottlePolicy, v: { key: string; start: number; t: number }) {
  // Typed, so PostgreSQL does not take a millisecond time for a 32-bit integer.
  const at = sql<number>`CAST(${v.t} AS bigint)`;
  const counted = sql<number>`(CASE WHEN ${at} - auth_throttle.last_failure > CAST(${p.windowMs} AS bigint) THEN 1 ELSE auth_throttle.failures + 1 END)`;
  const delay = delaySql(p, counted);
  return sql<{ failures: number }>`
        INSERT INTO auth_throttle (key, failures, next_attempt, last_failure)
        VALUES (${v.key}, 1, CAST(${v.start} AS bigint), ${at})
        ON CONFLICT (key) DO UPDATE SET
          failures = ${counted},
          next_attempt = CASE WHEN ${delay} > 0 THEN ${at} + ${delay} ELSE 0 END,
          last_failure = ${at}
        WHERE auth_throttle.next_attempt <= ${at}
        RETURNING failures`;
}

/**
 * Refuses (429) when any counter is in its back-off; otherwise counts one more attempt on each.
 * Each counter is charged by one statement (an upsert that counts only while the counter is out
 * of back-off and sets the next back-off with the count): parallel attempts queue on the row, so
 * none slips past the limit, and a counter deleted meanwhile (another instance's correct answer)
 * is simply counted anew.
 */
export async function chargeAttempt(ctx: Pick<ServiceContext, 'db'>, charges: Charge[]): Promise<void> {
  await guarded(async () => {
    const db = authDb(ctx);
    const now = Date.now();
    const keys = Object.fromEntries(charges.map((c, i) => [`k${i}`, c.key]));
    const { rows } = await authQuery(
      ctx,
      `throttle.held.${charges.length}`,
      (q, v) =>
        q.selectFrom('auth_throttle').select(['key', 'next_attempt']).where('key', 'in', Object.values(v)),
      keys,
    );
    const held = new Map(
      (rows as { key: string; next_attempt: number }[]).map((r) => [r.key, Number(r.next_attempt)]),
    );
    for (const c of charges) {
      const next = held.get(c.key) ?? 0;
      if (next > now) throw tooMany(next);
    }
    for (const c of charges) {
      const t = Date.now();
      const p = c.policy;
      const first = delayAfter(1, p);
      // One statement per policy, its numbers in it: built once (src/store/fixed.ts).
      const r = await authQuery(
        ctx,
        `throttle.charge:${p.free}:${p.baseMs}:${p.maxMs}:${p.windowMs}`,
        (_, v) => chargeSql(p, v),
        { key: c.key, start: first > 0 ? t + first : 0, t },
      );
      if (r.rows.length === 0) {
        // In back-off since the check above (a parallel attempt was counted first).
        const row = await db
          .selectFrom('auth_throttle')
          .select('next_attempt')
          .where('key', '=', c.key)
          .executeTakeFirst();
        throw tooMany(Number(row?.next_attempt ?? t + 1000));
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
    await authQuery(
      ctx,
      'throttle.clear',
      (db, v) => db.deleteFrom('auth_throttle').where('key', '=', v.key),
      {
        key: factor.key,
      },
    );
    if (address) {
      await authQuery(
        ctx,
        'throttle.refund',
        (db, v) =>
          db
            .updateTable('auth_throttle')
            .set((eb) => ({ failures: eb('failures', '-', 1) }))
            .where('key', '=', v.key)
            .where('failures', '>', 0),
        { key: address.key },
      );
    }
  });
}
