/**
 * Places in the change log, and what a reading transaction saw of it.
 *
 * On PostgreSQL writers of every instance append to the log side by side, with no lock between
 * them (src/store/pgwrite.ts), so sequence numbers are drawn in one order and committed in
 * another: a reader that moved past sequence number n while the transaction holding n - 1 was
 * still open would never see that change. Each change row therefore records its transaction's id
 * (`tx`, an xid8), and readers go through the log in (tx, seq) order, taking only rows of
 * transactions older than every one still running (`pg_snapshot_xmin`): nothing can appear
 * behind a reader's position any more. On SQLite, with one writer at a time, sequence order is
 * commit order and tx is '0'.
 */

/** A change-log row's place: readers move through the log in (tx, seq) order. */
export interface LogPosition {
  /** The writing transaction's id (xid8, decimal); '0' on SQLite and for rows older than the column. */
  tx: string;
  seq: number;
}

/** Before every row. */
export const LOG_START: LogPosition = Object.freeze({ tx: '0', seq: 0 });

/** Whether `a` comes after `b` in the log. */
export function isAfter(a: LogPosition, b: LogPosition): boolean {
  const ta = BigInt(a.tx);
  const tb = BigInt(b.tx);
  return ta !== tb ? ta > tb : a.seq > b.seq;
}

/**
 * The part of the log a reading transaction saw: on SQLite every row up to a sequence number; on
 * PostgreSQL the rows of the transactions its snapshot counts as committed (`pg_current_snapshot()`:
 * those below xmin, and those below xmax not listed as running).
 */
export type LogSnapshot =
  | { readonly upToSeq: number }
  | { readonly xmin: bigint; readonly xmax: bigint; readonly running: ReadonlySet<bigint> };

/** Nothing seen yet. */
export const SAW_NOTHING: LogSnapshot = Object.freeze({ upToSeq: 0 });

/** Reads PostgreSQL's snapshot text `xmin:xmax:xip,...`. */
export function pgLogSnapshot(text: string): LogSnapshot {
  const m = /^(\d+):(\d+):([\d,]*)$/.exec(text.trim());
  if (!m) throw new Error(`not a PostgreSQL snapshot: ${text}`);
  const running = new Set((m[3] as string).split(',').filter(Boolean).map(BigInt));
  return { xmin: BigInt(m[1] as string), xmax: BigInt(m[2] as string), running };
}

/** Whether a change was already visible to the transaction that took `snap`. */
export function sawChange(snap: LogSnapshot, change: LogPosition): boolean {
  if ('upToSeq' in snap) return change.seq <= snap.upToSeq;
  const tx = BigInt(change.tx);
  if (tx < snap.xmin) return true;
  return tx < snap.xmax && !snap.running.has(tx);
}
