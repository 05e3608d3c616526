// Why ~530 lines: every way a PostgreSQL write runs is here (BEGIN sent lazily, an update's
// unlocked read and its conditional final statement, lone creations together, the outcome of a
// statement whose connection was lost), and each relies on the others' invariants: which
// statements a write has sent decides whether it may read unlocked, commit alone or must lock.
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import { ApiError } from '../core/errors.js';
import type { AuditRow } from './auditrow.js';
import type { Database, Db } from './db.js';
import { databaseUnavailable } from './unavailable.js';

/**
 * How PostgreSQL write transactions of the object store (objects.ts) run side by side, on one
 * instance or many sharing a database, and still hand the change log to its readers in one order.
 *
 * - Writers take no lock for their work: the rows they change are locked as they read them
 *   (`FOR UPDATE` on the object written, `FOR KEY SHARE` on objects it references), so two
 *   writers of the same object queue on that row only, and a conditional write sees the ETag
 *   the other one committed.
 * - An update reads the row it replaces without BEGIN or a lock, as its first statement; its
 *   final statement then replaces the row only if the ETag is still the one read, and commits by
 *   itself: two round trips instead of four (BEGIN, the locking read, the final statement,
 *   COMMIT). A lost race runs the write again, locking (readForReplace).
 * - BEGIN is sent before a write's first statement only (pgWrite). The change rows of a
 *   transaction, and the object rows it inserts or updates, are kept in memory and written by
 *   one statement just before COMMIT (a creation with nothing to check is that statement alone,
 *   committing by itself; those of one instance go together while one is in flight: LoneWrites).
 * - The change log needs no lock either: each change row records its transaction's id (the
 *   column default of `changes.tx`), and readers take rows in (tx, seq) order only once every
 *   older transaction has ended (src/store/logposition.ts). Writers of different objects commit
 *   side by side, and PostgreSQL flushes their commits together.
 * - The same statement returns the transaction's id (`pg_current_xact_id()`): when the
 *   connection is lost during COMMIT the outcome is asked on a fresh connection
 *   (`pg_xact_status`), so a write that committed is answered as done.
 * - The other instances hear of the write after it committed, from CommitNotifier (notifier.ts):
 *   a NOTIFY inside the transaction would make every write of every instance commit one at a time.
 */

/** The PostgreSQL NOTIFY channel announcing committed writes (LISTENed to by the event tailer). */
export const CHANGES_CHANNEL = 'gatehouse_changes';

/**
 * A change-log row waiting for the end of its transaction. On PostgreSQL the object's own row is
 * written by the same final statement when `object` says so ('insert' or 'replace', with `time`
 * as its modify time): one round trip fewer per write.
 */
export interface PendingChange {
  type: string;
  id: string;
  data: string | null;
  etag: string;
  time: number;
  object?: 'insert' | 'replace';
  createTime?: number;
  /** The object's hidden state as stored (JSON or null), for `object`. */
  secret?: string | null;
  /** Other instances cache what this change touches (ObjectType.cachedElsewhere): tell them before answering. */
  prompt?: boolean;
  /**
   * The audit trail's row of the request that made the write: inserted by the same statement on
   * PostgreSQL, by the write's batch on SQLite (writebatch.ts).
   */
  audit?: AuditRow;
}

type Tx = Transaction<Database>;

/**
 * Appends the transaction's changes in order, in one round trip. Returns the transaction id
 * (text of an xid8). ORDER BY keeps the transaction's own order in its sequence numbers. The objects rows
 * the changes carry (`object`) are inserted or updated by the same statement; the rows updated
 * were locked FOR UPDATE when the transaction read them.
 */
export async function appendChanges(tx: Tx, changes: readonly PendingChange[]): Promise<string> {
  const [only] = changes;
  if (changes.length === 1 && only) return appendOne(tx, only);
  const col = <T>(f: (c: PendingChange) => T) => changes.map(f);
  const result = await sql<{ xid: string; inserted: string; replaced: string }>`
    WITH w AS (
      SELECT * FROM unnest(${col((c) => c.type)}::text[], ${col((c) => c.id)}::text[],
        ${col((c) => c.data)}::text[], ${col((c) => c.etag)}::text[], ${col((c) => c.time)}::int8[],
        ${col((c) => c.object ?? '')}::text[], ${col((c) => c.createTime ?? 0)}::int8[],
        ${col((c) => c.secret ?? null)}::text[])
        WITH ORDINALITY AS w(type, id, data, etag, time, object, create_time, secret, n)
    ),
    inserted AS (
      INSERT INTO objects (type, id, data, etag, create_time, modify_time, secret)
      SELECT w.type, w.id, w.data, w.etag, w.create_time, w.time, w.secret FROM w WHERE w.object = 'insert'
      RETURNING 1
    ),
    replaced AS (
      UPDATE objects o SET data = w.data, etag = w.etag, modify_time = w.time, secret = w.secret
      FROM w WHERE w.object = 'replace' AND o.type = w.type AND o.id = w.id
      RETURNING 1
    ),
    appended AS (
      INSERT INTO changes (type, id, data, etag, time)
      SELECT w.type, w.id, w.data, w.etag, w.time
      FROM w
      ORDER BY w.n
      RETURNING seq
    )${auditedMany(changes)}
    SELECT pg_current_xact_id()::text AS xid,
      (SELECT count(*) FROM inserted) AS inserted, (SELECT count(*) FROM replaced) AS replaced,
      (SELECT count(*) FROM appended) AS appended`.execute(tx);
  const row = result.rows[0];
  if (!row) throw new Error('change-log append returned no row');
  // Every object to replace was read and locked by this transaction: a missing one is a bug.
  if (Number(row.replaced) !== changes.filter((c) => c.object === 'replace').length)
    throw new Error('an object to replace was not found');
  return row.xid;
}

/** A CTE inserting the audit rows the changes carry, after the others (nothing when none does). */
function auditedMany(changes: readonly PendingChange[]) {
  const rows = changes.flatMap((c) => (c.audit ? [c.audit] : []));
  if (rows.length === 0) return sql``;
  const col = <T>(f: (r: AuditRow) => T) => rows.map(f);
  return sql`,
    audited AS (
      INSERT INTO audit_trail (type, id, data, time)
      SELECT * FROM unnest(${col((r) => r.type)}::text[], ${col((r) => r.id)}::text[],
        ${col((r) => r.data)}::text[], ${col((r) => r.time)}::int8[])
    )`;
}

/**
 * The INSERT of one write's audit row, for a CTE of the write's own statement: of the values given,
 * or with `onlyIfReplaced` once per row of the statement's `replaced` CTE (the conditional update:
 * no row replaced, no entry).
 */
const auditInsert = (r: AuditRow, onlyIfReplaced = false) =>
  onlyIfReplaced
    ? sql`INSERT INTO audit_trail (type, id, data, time)
        SELECT ${r.type}::text, ${r.id}::text, ${r.data}::text, ${r.time}::int8 FROM replaced`
    : sql`INSERT INTO audit_trail (type, id, data, time) VALUES (${r.type}, ${r.id}, ${r.data}, ${r.time})`;

/** The audit row a change carries, as a further CTE of a one-change statement (or nothing). */
const auditedOne = (c: PendingChange, onlyIfReplaced = false) =>
  c.audit ? sql`, audited AS (${auditInsert(c.audit, onlyIfReplaced)})` : sql``;

/** The change-log row of a write with one change. */
const changeRow = (c: PendingChange) => sql`INSERT INTO changes (type, id, data, etag, time)
  VALUES (${c.type}, ${c.id}, ${c.data}, ${c.etag}, ${c.time})`;

/**
 * appendChanges for a write with one change (most writes): the same work in a statement of plain
 * values. The general statement reads its rows from arrays through a set-returning function, CTE
 * results and a sort, each of which PostgreSQL keeps in memory allocated for the statement; freed
 * at its end, that memory went back to the operating system (glibc trims the heap) and was asked
 * for again by the next one, and the page faults and TLB shootdowns cost about a third of the
 * PostgreSQL backends' CPU under write load (docs/benchmarks.md, "The write statement's memory").
 * Here the change-log insert is a CTE that nothing reads: PostgreSQL runs it to completion after
 * the main statement, keeping no result.
 */
async function appendOne(tx: Tx, c: PendingChange): Promise<string> {
  const row = (await oneChangeStatement(c).execute(tx)).rows[0];
  // The object to replace was read and locked by this transaction: a missing one is a bug.
  if (!row)
    throw new Error(
      c.object === 'replace' ? 'an object to replace was not found' : 'change-log append returned no row',
    );
  return row.xid;
}

/** The statement of appendOne (exported for the test of its plan). */
export function oneChangeStatement(c: PendingChange) {
  const xid = sql`pg_current_xact_id()::text AS xid`;
  if (c.object === 'insert')
    return sql<{ xid: string }>`WITH appended AS (${changeRow(c)})${auditedOne(c)}
      INSERT INTO objects (type, id, data, etag, create_time, modify_time, secret)
      VALUES (${c.type}, ${c.id}, ${c.data}, ${c.etag}, ${c.createTime ?? 0}, ${c.time}, ${c.secret ?? null})
      RETURNING ${xid}`;
  if (c.object === 'replace')
    return sql<{ xid: string }>`WITH appended AS (${changeRow(c)})${auditedOne(c)}
      UPDATE objects SET data = ${c.data}, etag = ${c.etag}, modify_time = ${c.time}, secret = ${c.secret ?? null}
      WHERE type = ${c.type} AND id = ${c.id}
      RETURNING ${xid}`;
  if (c.audit)
    return sql<{ xid: string }>`WITH audited AS (${auditInsert(c.audit)}) ${changeRow(c)} RETURNING ${xid}`;
  return sql<{ xid: string }>`${changeRow(c)} RETURNING ${xid}`;
}

/**
 * The final statement of an update whose row was read without a lock (readForReplace): it
 * replaces the row and appends the change only if the row still has the ETag read, and returns
 * no row otherwise. Committing by itself, it is the whole write transaction.
 */
export function replaceIfUnchangedStatement(c: PendingChange, readEtag: string) {
  return sql<{ xid: string }>`WITH replaced AS (
      UPDATE objects SET data = ${c.data}, etag = ${c.etag}, modify_time = ${c.time}, secret = ${c.secret ?? null}
      WHERE type = ${c.type} AND id = ${c.id} AND etag = ${readEtag}
      RETURNING 1
    ), appended AS (
      INSERT INTO changes (type, id, data, etag, time)
      SELECT ${c.type}::text, ${c.id}::text, ${c.data}::text, ${c.etag}::text, ${c.time}::int8 FROM replaced
    )${auditedOne(c, true)}
    SELECT pg_current_xact_id()::text AS xid FROM replaced`;
}

/** The error of a write whose row changed after it read it unlocked: lostRace, so it runs again. */
const rowMoved = () =>
  Object.assign(new Error('the row changed after the write read it; running the write again'), {
    code: '40001',
  });

/** A row a write read before its transaction began, and the ETag it had. */
interface UnlockedRead {
  type: string;
  id: string;
  etag: string;
}

/** What readForReplace needs of a running pgWrite. */
interface WriteState {
  /** The write may still read unlocked: nothing has been sent inside a transaction yet. */
  unlockedAllowed(): boolean;
  run(text: string, params: unknown[]): Promise<pg.QueryResult>;
  reads: UnlockedRead[];
}

// Keyed by each write's own transaction object, which nothing else can reach.
// module-state: an entry goes with its write; no service shares one.
const writeStates = new WeakMap<Tx, WriteState>();

/**
 * Reads the row an update is going to replace (`text`, without FOR UPDATE; `params`). As the
 * write's first statement, on its first attempt, this runs without BEGIN or a lock, and the ETag
 * read is remembered: the final statement replaces the row only if it still has it
 * (replaceIfUnchangedStatement), and a write that needs another statement first locks the row
 * and checks the ETag again (pgWrite). Returns undefined when the read must lock instead (the
 * caller reads with FOR UPDATE inside the transaction, as before).
 */
export async function readForReplace<R extends { etag: string }>(
  tx: Tx,
  text: string,
  params: unknown[],
  type: string,
  id: string,
): Promise<{ row: R | undefined } | undefined> {
  const state = writeStates.get(tx);
  if (!state?.unlockedAllowed()) return undefined;
  const row = (await state.run(text, params)).rows[0] as R | undefined;
  if (row) state.reads.push({ type, id, etag: row.etag });
  return { row };
}

/** How long the outcome of a transaction whose COMMIT was cut off is asked for, at most. */
export const OUTCOME_WAIT_MS = 3_000;

/**
 * Whether the transaction `xid` committed, asked on a fresh connection after its own was lost
 * during COMMIT. 'in progress' (the server has not finished that COMMIT yet) is asked again until
 * OUTCOME_WAIT_MS; then, or when the database cannot answer, undefined: the outcome is unknown.
 */
export async function transactionCommitted(db: Db, xid: string): Promise<boolean | undefined> {
  const pool = db.pool;
  if (!pool) return undefined;
  const until = Date.now() + OUTCOME_WAIT_MS;
  for (;;) {
    let status: string | null | undefined;
    try {
      const r = await pool.query<{ status: string | null }>('SELECT pg_xact_status($1::xid8) AS status', [
        xid,
      ]);
      status = r.rows[0]?.status;
    } catch {
      return undefined;
    }
    if (status === 'committed') return true;
    if (status === 'aborted') return false;
    if (status !== 'in progress' || Date.now() >= until) return undefined;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * An update's final statement alone (replaceIfUnchangedStatement): throws rowMoved when the row
 * changed since it was read. When the connection is lost, the outcome is the change it logged:
 * if that is there, returns the connection's error (the caller does not hand it out again);
 * otherwise throws it. Returns undefined when all went well.
 */
async function replaceAlone(
  db: Db,
  tx: Tx,
  change: PendingChange,
  readEtag: string,
  client: pg.PoolClient,
): Promise<unknown> {
  let replaced: boolean;
  try {
    replaced = (await replaceIfUnchangedStatement(change, readEtag).execute(tx)).rows.length > 0;
  } catch (err) {
    if (!databaseUnavailable(err)) throw err;
    const pid = (client as unknown as { processID?: number }).processID;
    if ((await loneStatementCommitted(db, pid, [change])) !== true) throw err;
    return err;
  }
  if (!replaced) throw rowMoved();
  return undefined;
}

/**
 * Runs a write transaction on its own pooled connection with BEGIN sent lazily, before the first
 * statement `fn` makes. `fn` returns its changes (and may make no statement at all, as a
 * creation with nothing to check does): then the one final statement (appendChanges, which also
 * writes the objects) runs alone and commits by itself: one round trip for the whole write.
 * Otherwise BEGIN ... final statement ... COMMIT.
 *
 * When the connection is lost at the end, the outcome is asked for: after a COMMIT, by the
 * transaction id (pg_xact_status); after a lone final statement, which returned no id, by
 * waiting until its backend is no longer running a statement and looking for the first object
 * it created (a new, random id: only that statement can have made it).
 */
export async function pgWrite<T>(
  db: Db,
  fn: (tx: Tx) => Promise<{ result: T; changes: readonly PendingChange[] }>,
  together?: LoneWrites,
  /** readForReplace may read without a lock (a first attempt; a rerun after a lost race locks). */
  unlockedReads = false,
): Promise<T> {
  const pool = db.pool as pg.Pool;
  const client = await pool.connect();
  let begun = false;
  let lone = false;
  let released = false;
  const reads: UnlockedRead[] = [];
  /** BEGIN, then lock the rows read unlocked and check that they have not changed since. */
  const begin = async () => {
    await client.query('BEGIN');
    begun = true;
    for (const r of reads) {
      const now = await client.query<{ etag: string }>(
        'SELECT etag FROM objects WHERE type = $1 AND id = $2 FOR UPDATE',
        [r.type, r.id],
      );
      if (now.rows[0]?.etag !== r.etag) throw rowMoved();
    }
  };
  const lazy = {
    query: async (text: string, params?: unknown[]) => {
      if (!begun && !lone) await begin();
      return client.query(text, params);
    },
    release() {},
  };
  const tx = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: { connect: async () => lazy, end: async () => {} } as never }),
  }) as unknown as Tx;
  writeStates.set(tx, {
    unlockedAllowed: () => unlockedReads && !begun && !lone && reads.length === 0,
    run: (text, params) => client.query(text, params),
    reads,
  });
  let broken: unknown;
  try {
    const { result, changes } = await fn(tx);
    if (changes.length === 0) {
      if (begun) await client.query('COMMIT');
      return result;
    }
    const [only] = changes;
    const [read] = reads;
    if (
      !begun &&
      read &&
      changes.length === 1 &&
      only?.object === 'replace' &&
      only.type === read.type &&
      only.id === read.id
    ) {
      // The whole write in one statement, on the condition that the row is as it was read.
      lone = true;
      broken = await replaceAlone(db, tx, only, read.etag, client);
      return result;
    }
    // Anything else a write read unlocked is locked and checked now, inside the transaction.
    if (!begun && reads.length > 0) await begin();
    if (!begun && together) {
      // Its connection is not needed: the statement runs with those of other writes (LoneWrites).
      lone = true;
      client.release();
      released = true;
      await together.append(changes);
      return result;
    }
    if (!begun) {
      lone = true;
      try {
        await appendChanges(tx, changes);
      } catch (err) {
        if (!databaseUnavailable(err)) throw err;
        broken = err;
        if (
          (await loneStatementCommitted(
            db,
            (client as unknown as { processID?: number }).processID,
            changes,
          )) !== true
        )
          throw err;
      }
      return result;
    }
    const xid = await appendChanges(tx, changes);
    try {
      await client.query('COMMIT');
    } catch (err) {
      if (!databaseUnavailable(err)) throw err;
      broken = err;
      if ((await transactionCommitted(db, xid)) !== true) throw err;
    }
    return result;
  } catch (err) {
    if (databaseUnavailable(err)) broken = err;
    else if (begun) await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    // A connection that failed is not handed out again.
    if (!released) client.release(broken === undefined ? undefined : true);
  }
}

/** Writes whose changes one statement appends at most. */
const MAX_TOGETHER = 64;

/**
 * Creations with nothing to check (a write whose only statement is its final one: pgWrite) run
 * together: while one such statement is in flight, the next ones gather, and then go in one
 * statement, which commits by itself. Under load that is one round trip, one commit and one WAL
 * flush for many writes instead of one each; at rest a write goes at once, as alone. Each
 * caller's promise settles once its changes are committed. When the statement fails for another
 * reason than a lost connection (a key another write holds), each write of the group runs again
 * alone, so that only the one at fault fails, with its own error; when the connection is lost,
 * the outcome, the same for all, is asked for as for one write (pgWrite).
 */
export class LoneWrites {
  private queue: { changes: readonly PendingChange[]; done: (err?: unknown) => void }[] = [];
  private inFlight = false;

  constructor(private readonly db: Db) {}

  append(changes: readonly PendingChange[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ changes, done: (err) => (err === undefined ? resolve() : reject(err)) });
      if (!this.inFlight) void this.drain();
    });
  }

  private async drain() {
    const alone = (changes: readonly PendingChange[]) =>
      pgWrite(this.db, async () => ({ result: undefined, changes }));
    this.inFlight = true;
    try {
      while (this.queue.length > 0) {
        const group = this.queue.splice(0, MAX_TOGETHER);
        try {
          await alone(group.flatMap((w) => w.changes));
          for (const w of group) w.done();
        } catch (err) {
          if (group.length === 1 || databaseUnavailable(err)) for (const w of group) w.done(err);
          else
            await Promise.all(
              group.map((w) =>
                alone(w.changes).then(
                  () => w.done(),
                  (e: unknown) => w.done(e),
                ),
              ),
            );
        }
      }
    } finally {
      this.inFlight = false;
    }
  }
}

/**
 * Whether a lone final statement (no BEGIN) committed, after its connection was lost: once its
 * backend runs no statement any more (bounded by OUTCOME_WAIT_MS), it committed exactly when
 * the first object it created exists, or the change it logged for the object it replaced.
 * undefined: unknown (nothing to look for, or no answer).
 */
async function loneStatementCommitted(
  db: Db,
  pid: number | undefined,
  changes: readonly PendingChange[],
): Promise<boolean | undefined> {
  const pool = db.pool;
  const created = changes.find((c) => c.object === 'insert');
  const replaced = changes.find((c) => c.object === 'replace');
  if (!pool || (!created && !replaced)) return undefined;
  const until = Date.now() + OUTCOME_WAIT_MS;
  try {
    for (;;) {
      const r = await pool.query<{ state: string | null }>(
        'SELECT state FROM pg_stat_activity WHERE pid = $1',
        [pid ?? 0],
      );
      if (r.rows[0]?.state !== 'active') break;
      if (Date.now() >= until) return undefined;
      await new Promise((res) => setTimeout(res, 50));
    }
    // A creation made a new, random id; a replacement logged a new, random ETag.
    const found = created
      ? await pool.query('SELECT 1 FROM objects WHERE type = $1 AND id = $2', [created.type, created.id])
      : await pool.query('SELECT 1 FROM changes WHERE type = $1 AND id = $2 AND etag = $3 LIMIT 1', [
          replaced?.type,
          replaced?.id,
          replaced?.etag,
        ]);
    return found.rows.length > 0;
  } catch {
    return undefined;
  }
}

/** Times a PostgreSQL write is tried when it lost a race it can win by running again. */
export const WRITE_ATTEMPTS = 4;

/**
 * Errors of a concurrent writer that running the transaction again resolves: a deadlock between
 * row locks (40P01), a serialization failure (40001), and a unique key another transaction
 * claimed after this one checked it (23505: the rerun finds the owner and answers 409).
 */
export function lostRace(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === '40P01' || code === '40001' || code === '23505';
}

/** A unique key still taken after every attempt (never expected: the rerun's own check finds it). */
export const keyTaken = () => new ApiError('Conflict', 'another object already holds one of these keys');
