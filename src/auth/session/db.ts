import type { Kysely } from 'kysely';
import { type Buildable, type FixedResult, type FixedValues, fixedQuery } from '../../store/fixed.js';
import type { ServiceContext } from '../../store/service.js';

/** Tables of migration 0002_auth_sessions (src/store/migrations.ts). */
export interface SessionsTable {
  /** Public session ID: shown in lists, carried by intents; never a credential. */
  id: string;
  /** sha256 of the cookie token; the token itself is never stored. Rotated on every level change. */
  token_hash: string;
  /** '' until the session is identified by /auth/email. */
  user_id: string;
  device_id: string;
  level: number;
  /** JSON array of the factors proven in this session. */
  factors: string;
  /** JSON object: location, user agent, address, activation state. */
  data: string;
  create_time: number;
  last_seen: number;
  /** Absolute end of the session (creation + Tenant.SessionMaxSeconds). */
  expire_time: number;
}

export interface AuthKeysTable {
  name: string;
  value: string;
  create_time: number;
}

export interface ThrottleTable {
  key: string;
  failures: number;
  next_attempt: number;
  last_failure: number;
}

/** Migration 0011_trusted_devices: devices where a user completed a sign-in (factors/devices.ts). */
export interface TrustedDevicesTable {
  user_id: string;
  /** deviceTag() of the device ID: never the ID itself, which is a cookie value. */
  tag: string;
  /** The last completed sign-in there (ms), rewritten at most every TRUSTED_DEVICES.refreshMs. */
  last_used: number;
}

export type AuthTables = {
  sessions: SessionsTable;
  auth_keys: AuthKeysTable;
  auth_throttle: ThrottleTable;
  trusted_devices: TrustedDevicesTable;
};

/** The service's Kysely handle, typed with the sign-in tables. */
export const authDb = (ctx: Pick<ServiceContext, 'db'>): Kysely<AuthTables> =>
  ctx.db.kysely.withTables<AuthTables>() as unknown as Kysely<AuthTables>;

/**
 * Runs a sign-in statement of fixed shape (src/store/fixed.ts): built once per database, then
 * run with new values; on SQLite outside a transaction at once. `tx`: a transaction to run it in.
 */
export function authQuery<R = unknown, V extends FixedValues<V> = Record<string, string | number>>(
  ctx: Pick<ServiceContext, 'db'>,
  name: string,
  build: (db: Kysely<AuthTables>, v: V) => Buildable,
  values: V,
  tx?: Kysely<AuthTables>,
): Promise<FixedResult<R>> {
  return fixedQuery<R, V>(
    ctx.db,
    name,
    (k, v) => build(k as unknown as Kysely<AuthTables>, v),
    values,
    tx as unknown as Kysely<never> | undefined,
  );
}
