import { sql } from 'kysely';
import { Jobs } from '../core/jobs.js';
import type { Db } from './db.js';
import { LOG_START, type LogPosition } from './logposition.js';
import { runBesideOtherWriters } from './otherwriters.js';

/**
 * Retention of the change log (`changes`). Every write appends a row; the rows serve the event
 * stream's tailers (src/events/tailer.ts), which read each change once, soon after it commits.
 * Rows older than the retention are deleted in small batches, oldest first, by a background
 * pruner. Two rules keep the readers safe:
 *
 * - The newest row is never deleted, so the newest sequence number (lastSeq) never goes back.
 * - Every prune records the last place in the log (src/store/logposition.ts) of the rows it
 *   deleted (`changes_pruned`, only ever raised, in the same transaction as the delete). A reader
 *   whose position is before that mark has lost changes it never read, and knows it: the event
 *   stream then tells its subscribers to resync from a snapshot (docs/events.md, "Resync").
 */

/** Rows deleted per transaction: small, so a prune never holds up writes for long. */
export const PRUNE_BATCH = 500;

/** The last place in the log pruned so far (LOG_START when nothing was). */
export async function prunedThrough(db: Db): Promise<LogPosition> {
  const row = (
    await sql<{ tx: string; seq: number | string }>`SELECT ${
      db.dialect === 'postgres' ? sql`tx::text` : sql`'0'`
    } AS tx, seq FROM changes_pruned WHERE id = 1`.execute(db.kysely)
  ).rows[0];
  return row ? { tx: row.tx, seq: Number(row.seq) } : LOG_START;
}

/**
 * Deletes one batch of change-log rows written before `before` (epoch ms), oldest first, never the
 * newest row. Returns how many rows it deleted (0: nothing left to prune).
 */
export async function pruneBatch(db: Db, before: number, batch = PRUNE_BATCH): Promise<number> {
  return runBesideOtherWriters(db, () => pruneOnce(db, before, batch));
}

async function pruneOnce(db: Db, before: number, batch: number): Promise<number> {
  return db.kysely.transaction().execute(async (tx) => {
    const newest = await tx
      .selectFrom('changes')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirst();
    const keep = Number(newest?.seq ?? 0);
    const oldest = await tx
      .selectFrom('changes')
      .select(['seq', 'time'])
      .where('seq', '<', keep)
      .orderBy('seq')
      .limit(batch)
      .execute();
    // The oldest rows in sequence order, up to the first one young enough to keep. Sequence and
    // time go up together but for the time a concurrent write takes between reading the clock and
    // drawing its sequence number (milliseconds): a row left behind by that waits for the next run.
    let upTo = 0;
    let n = 0;
    for (const row of oldest) {
      if (Number(row.time) >= before) break;
      upTo = Number(row.seq);
      n++;
    }
    if (n === 0) return 0;
    if (db.dialect === 'postgres')
      await sql`WITH gone AS (DELETE FROM changes WHERE seq <= ${upTo} RETURNING tx, seq),
        last AS (SELECT tx, seq FROM gone ORDER BY tx DESC, seq DESC LIMIT 1)
        UPDATE changes_pruned p SET tx = last.tx, seq = last.seq FROM last
        WHERE p.id = 1 AND (p.tx, p.seq) < (last.tx, last.seq)`.execute(tx);
    else {
      await tx.deleteFrom('changes').where('seq', '<=', upTo).execute();
      await sql`UPDATE changes_pruned SET seq = ${upTo} WHERE id = 1 AND seq < ${upTo}`.execute(tx);
    }
    return n;
  });
}

/** One batch of a pruner: deletes up to `batch` rows written before `before`; returns how many. */
export type PruneBatch = (db: Db, before: number, batch: number) => Promise<number>;

export interface PrunerOptions {
  /** How long rows are kept, in ms; 0 keeps them for good. */
  retentionMs: number;
  /** How often to look for rows to prune, in ms. */
  intervalMs?: number;
  /** Pause between two batches, in ms, so writers always get their turn. */
  pauseMs?: number;
  batch?: number;
  onError?: (err: unknown) => void;
  /** After each run that deleted rows (tests, logs). */
  onPruned?: (rows: number) => void;
  /** What to prune; the change log by default. */
  prune?: PruneBatch;
}

/** The interval between runs: a tenth of the retention, between one second and one minute. */
export const pruneInterval = (retentionMs: number) => Math.min(60_000, Math.max(1_000, retentionMs / 10));

/**
 * Prunes the change log (or, with `prune`, another time-ordered log) in the background until
 * stopped: a job named `name` of `jobs` (the service's background jobs, src/core/jobs.ts), or,
 * without `jobs`, of its own (tests). Each instance sharing a database runs one; deleting rows
 * another instance already deleted does nothing, so they need no coordination. With a retention
 * of 0 no job is added: everything is kept.
 */
export function startPruner(
  db: Db,
  opts: PrunerOptions,
  jobs?: Jobs,
  name = 'change log pruning',
): { stop(): Promise<void>; runOnce(): Promise<number> } {
  const pause = opts.pauseMs ?? 20;
  const batch = opts.batch ?? PRUNE_BATCH;
  let stopped = false;
  let running: Promise<number> | undefined;
  const run = async (signal?: AbortSignal) => {
    let total = 0;
    for (;;) {
      // Stopping (the pruner's or the service's) ends a run between two batches.
      if (stopped || signal?.aborted) break;
      const n = await (opts.prune ?? pruneBatch)(db, Date.now() - opts.retentionMs, batch);
      total += n;
      if (n < batch) break;
      await new Promise((r) => setTimeout(r, pause));
    }
    if (total > 0) opts.onPruned?.(total);
    return total;
  };
  const runOnce = (signal?: AbortSignal) => {
    running ??= run(signal).finally(() => {
      running = undefined;
    });
    return running;
  };
  const owner = jobs ?? new Jobs((err) => opts.onError?.(err));
  if (opts.retentionMs > 0)
    owner.every(name, opts.intervalMs ?? pruneInterval(opts.retentionMs), (signal) => runOnce(signal));
  if (!jobs) owner.start();
  return {
    runOnce,
    async stop() {
      stopped = true;
      if (!jobs) await owner.stop();
      await running?.catch(() => undefined);
    },
  };
}

/** The transaction that has held the change log's readers back longest (PostgreSQL), for an operator. */
export interface OpenTransaction {
  pid: number;
  database: string | null;
  user: string | null;
  state: string | null;
  /** Seconds since it began. */
  openSeconds: number;
  /** Its client's application_name. Its statement is not shown: another program's may hold secrets. */
  application: string | null;
}

/**
 * The oldest transaction with an id still running on the PostgreSQL server (any database): the
 * one every reader of the log waits for (src/store/logposition.ts). Undefined on SQLite, or when
 * none is running.
 */
export async function oldestOpenTransaction(db: Db): Promise<OpenTransaction | undefined> {
  if (db.dialect !== 'postgres') return undefined;
  const r = await sql<{
    pid: number;
    datname: string | null;
    usename: string | null;
    state: string | null;
    open_s: string | null;
    application_name: string | null;
  }>`SELECT pid, datname, usename, state, extract(epoch FROM now() - xact_start)::text AS open_s,
      application_name
    FROM pg_stat_activity WHERE backend_xid IS NOT NULL
    ORDER BY age(backend_xid) DESC LIMIT 1`.execute(db.kysely);
  const row = r.rows[0];
  if (!row) return undefined;
  return {
    pid: Number(row.pid),
    database: row.datname,
    user: row.usename,
    state: row.state,
    openSeconds: Math.round(Number(row.open_s ?? 0) * 10) / 10,
    application: row.application_name || null,
  };
}
