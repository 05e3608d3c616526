import { isIPv6 } from 'node:net';
import { sql } from 'kysely';
import { ApiError } from '../core/errors.js';
import type { ServiceContext } from '../store/service.js';
import { authQuery } from './session/db.js';

/**
 * Rate limits on questions whose answer tells something by itself, however it is asked: "does
 * an account have this e-mail address?" (POST /auth/email must answer Account Missing, as the
 * spec says). Unlike the failure counters of throttle.ts, every question counts, answered yes or
 * no, so the limit itself says nothing about the answer.
 *
 * A generic cell rate algorithm (GCRA, a token bucket kept as one number): the row of a source
 * holds the time at which its bucket would be full again ("theoretical arrival time"). A request
 * is allowed while that time is less than `burst` intervals ahead, and moves it one interval on.
 * One conditional UPDATE decides, so concurrent requests and several instances sharing the
 * database cannot overdraw the bucket. Rows live in auth_throttle under their own key prefix
 * (`rate:<limit>:<source>`), `last_failure` holding the arrival time. A row whose arrival time
 * has passed is the same as no row (a full bucket), so the sweep of stale counters may delete it.
 */
export interface RateLimit {
  /** Part of the row key: limits never share a bucket. */
  name: string;
  /** Requests allowed at once from a fresh source. */
  burst: number;
  /** One more request is allowed every this many milliseconds. */
  intervalMs: number;
}

/** E-mail lookups (POST /auth/email, and the `email` field of any factor step): docs/signin.md. */
export const EMAIL_LOOKUP: RateLimit = { name: 'email', burst: 30, intervalMs: 10_000 };

/**
 * The source a limit is counted for: the client address (req.ip, which honours server.trustproxy),
 * IPv6 by its /64 network, since one host commonly holds a whole /64 and could otherwise take a
 * fresh address for every question. IPv4-mapped IPv6 addresses count as the IPv4 address.
 */
export function rateSource(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1] as string;
  if (!isIPv6(ip)) return ip;
  const [head = '', tail] = ip.toLowerCase().split('%')[0]?.split('::') ?? [];
  // A dotted IPv4 ending stands for the last two groups.
  const groupsOf = (part: string) =>
    part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const left = groupsOf(head);
  const right = tail === undefined ? [] : groupsOf(tail);
  const fill = tail === undefined ? [] : Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0');
  const groups = [...left, ...fill, ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

function tooMany(next: number): ApiError {
  // HTTP-dates have whole seconds: round up so a client waiting until then is accepted.
  const when = new Date(Math.ceil(next / 1000) * 1000);
  return new ApiError(
    'TooManyRequests',
    `too many requests from your address; try again after ${when.toISOString()}`,
    {
      headers: {
        'X-Next-Attempt': when.toUTCString(),
        'Retry-After': String(Math.max(1, Math.ceil((next - Date.now()) / 1000))),
      },
    },
  );
}

/**
 * Takes one request from the source's bucket, or refuses with 429 (X-Next-Attempt, Retry-After).
 * Refused requests are not counted, so a client that waits as told gets in. When the counter
 * cannot be read or written the request is refused (503): the limit fails closed.
 */
export async function takeRequest(
  ctx: Pick<ServiceContext, 'db'>,
  limit: RateLimit,
  ip: string,
): Promise<void> {
  const key = `rate:${limit.name}:${rateSource(ip)}`;
  const now = Date.now();
  const capacity = limit.burst * limit.intervalMs;
  let refusedUntil: number | undefined;
  try {
    // Usually one statement: the conditional UPDATE. A new source gets its row inserted (a race
    // with another instance inserting it too is settled by the primary key, then the UPDATE again).
    // Each statement is built once per limit (src/store/fixed.ts).
    for (let attempt = 0; ; attempt++) {
      const r = await authQuery(
        ctx,
        `rate.take:${limit.intervalMs}:${capacity}`,
        (db, v) => {
          // The arrival time after this request: one interval past the later of now and the stored one.
          const next = sql<number>`(CASE WHEN last_failure > ${v.now} THEN last_failure ELSE ${v.now} END) + ${limit.intervalMs}`;
          return db
            .updateTable('auth_throttle')
            .set({ last_failure: next })
            .where('key', '=', v.key)
            .where(sql<boolean>`${next} - ${v.now} <= ${capacity}`);
        },
        { now, key },
      );
      if (r.affected === 1) break;
      const [row] = (
        await authQuery(
          ctx,
          'rate.arrival',
          (db, v) => db.selectFrom('auth_throttle').select('last_failure').where('key', '=', v.key),
          { key },
        )
      ).rows as { last_failure: number }[];
      if (row) {
        const until = Number(row.last_failure) + limit.intervalMs - capacity;
        // Full: refuse. Not full: the row was inserted by a parallel request after this UPDATE
        // looked for it; take from it (refusing here would turn a race into a 429).
        if (until > now || attempt >= 2) {
          refusedUntil = until;
          break;
        }
        continue;
      }
      if (attempt >= 2) throw new Error('rate limit row contended');
      const ins = await authQuery(
        ctx,
        'rate.insert',
        (db, v) =>
          db
            .insertInto('auth_throttle')
            .values({ key: v.key, failures: 0, next_attempt: 0, last_failure: v.arrival })
            .onConflict((oc) => oc.column('key').doNothing()),
        { key, arrival: now + limit.intervalMs },
      );
      if (ins.affected === 1) break;
    }
  } catch {
    throw new ApiError(
      'Unavailable',
      'requests cannot be counted right now, so none are accepted; try again later',
    );
  }
  if (refusedUntil !== undefined) throw tooMany(Math.max(refusedUntil, now + 1));
}
