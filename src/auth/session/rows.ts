import { type Kysely, sql } from 'kysely';
import { ReadBatches } from '../../store/readbatch.js';
import type { ServiceContext } from '../../store/service.js';
import { TRUSTED_DEVICES } from '../throttle.js';
import { type AuthTables, authDb, authQuery, type SessionsTable } from './db.js';

/**
 * The statements on session rows (sessions.ts), each of fixed shape: built once per database and,
 * on SQLite outside a transaction, run at once (src/store/fixed.ts).
 */
type Db = Pick<ServiceContext, 'db'>;

export const insertSessionRow = (ctx: Db, row: SessionsTable) =>
  authQuery(ctx, 'session.insert', (db, v) => db.insertInto('sessions').values(v), row);

const oneByToken = async (ctx: Db, hash: string) => {
  const { rows } = await authQuery(
    ctx,
    'session.byToken',
    (db, v) => db.selectFrom('sessions').selectAll().where('token_hash', '=', v.hash),
    { hash },
  );
  return rows[0] as SessionsTable | undefined;
};

// module-state: per database handle, the gathering of session reads by token (PostgreSQL); gone with the handle.
const byTokenReads = new WeakMap<ServiceContext['db'], ReadBatches<SessionsTable>>();

/**
 * The session whose token hashes to `hash`. On PostgreSQL the lookups of one turn of the event
 * loop go to the database as one statement (src/store/readbatch.ts): every request authenticated
 * by a session cookie makes one, and its round trip, not the row, was most of its cost.
 */
export async function sessionRowByToken(ctx: Db, hash: string): Promise<SessionsTable | undefined> {
  if (ctx.db.dialect !== 'postgres') return oneByToken(ctx, hash);
  let reads = byTokenReads.get(ctx.db);
  if (!reads) {
    const handle = { db: ctx.db };
    reads = new ReadBatches<SessionsTable>(
      (_, h) => oneByToken(handle, h),
      async (_, hashes) =>
        (await authDb(handle)
          .selectFrom('sessions')
          .selectAll()
          .where(sql<boolean>`token_hash = ANY(${hashes}::text[])`)
          .execute()) as SessionsTable[],
      (row) => row.token_hash,
    );
    byTokenReads.set(ctx.db, reads);
  }
  return reads.get('sessions', hash);
}

/** The row by ID; in `tx`, locked until its end on PostgreSQL (SQLite runs one writer at a time). */
export async function sessionRowById(
  ctx: Db,
  id: string,
  tx?: Kysely<AuthTables>,
): Promise<SessionsTable | undefined> {
  const lock = tx !== undefined && ctx.db.dialect === 'postgres';
  const { rows } = await authQuery(
    ctx,
    lock ? 'session.lock' : 'session.byId',
    (db, v) => {
      const q = db.selectFrom('sessions').selectAll().where('id', '=', v.id);
      return lock ? q.forUpdate() : q;
    },
    { id },
    tx,
  );
  return rows[0] as SessionsTable | undefined;
}

export async function sessionUserOf(ctx: Db, id: string): Promise<string | undefined> {
  const { rows } = await authQuery(
    ctx,
    'session.userOf',
    (db, v) => db.selectFrom('sessions').select('user_id').where('id', '=', v.id),
    { id },
  );
  return (rows[0] as { user_id: string } | undefined)?.user_id;
}

/** Deletes the row; the number deleted (0 or 1). */
export const deleteSessionRow = async (ctx: Db, id: string): Promise<number> =>
  (
    await authQuery(ctx, 'session.delete', (db, v) => db.deleteFrom('sessions').where('id', '=', v.id), {
      id,
    })
  ).affected;

export const touchSessionRow = (ctx: Db, id: string, now: number) =>
  authQuery(
    ctx,
    'session.touch',
    (db, v) => db.updateTable('sessions').set({ last_seen: v.now }).where('id', '=', v.id),
    {
      now,
      id,
    },
  );

/** What saving a session writes: its user, level, factors and data, and a new token's hash. */
export type SessionSet = Pick<SessionsTable, 'user_id' | 'level' | 'factors' | 'data'> & {
  token_hash?: string;
};

/** Writes a session's new state (two shapes: with a new token hash, or without); rows updated. */
export const writeSessionRow = async (ctx: Db, id: string, set: SessionSet, tx?: Kysely<AuthTables>) =>
  (
    await authQuery(
      ctx,
      set.token_hash === undefined ? 'session.save' : 'session.saveRotated',
      (db, { id: key, ...v }) => db.updateTable('sessions').set(v).where('id', '=', key),
      { ...set, id },
      tx,
    )
  ).affected;

/**
 * Deletes what has ended, for every user: sessions past their end or idle for `idleMs`,
 * regulation counters out of back-off and a day without a failure, and devices unused for
 * TRUSTED_DEVICES.forgetMs (those of users who never sign in again, or were deleted, included).
 */
export async function sweepEnded(ctx: Db, idleMs: number) {
  const now = Date.now();
  const db = authDb(ctx);
  await db
    .deleteFrom('sessions')
    .where((eb) => eb.or([eb('expire_time', '<=', now), eb('last_seen', '<=', now - idleMs)]))
    .execute();
  await db
    .deleteFrom('auth_throttle')
    .where('next_attempt', '<=', now)
    .where('last_failure', '<=', now - 24 * 3600_000)
    .execute();
  await db
    .deleteFrom('trusted_devices')
    .where('last_used', '<=', now - TRUSTED_DEVICES.forgetMs)
    .execute();
}
