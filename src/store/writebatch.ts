import type { ControlledTransaction, Transaction } from 'kysely';
import type { Database, Db } from './db.js';
import { anotherProcessWrote } from './otherwriters.js';

/**
 * A table that writes only append to and that no write reads back in its transaction (the change
 * log, the audit trail): its rows wait for the batch's end and go in together (WriteBatches).
 */
export class AppendOnlyTable {
  /** The INSERT of n rows, by n: built once for each size used. */
  readonly #inserts = new Map<number, string>();

  constructor(
    readonly name: string,
    readonly columns: readonly string[],
  ) {}

  /** The statement that inserts `rows` rows. */
  insertOf(rows: number): string {
    let text = this.#inserts.get(rows);
    if (text === undefined) {
      const row = `(${this.columns.map(() => '?').join(', ')})`;
      text = `INSERT INTO ${this.name} (${this.columns.join(', ')}) VALUES ${Array(rows).fill(row).join(', ')}`;
      this.#inserts.set(rows, text);
    }
    return text;
  }
}

/** A row a write appends to an append-only table, its values in the table's column order. */
export interface AppendedRow {
  readonly into: AppendOnlyTable;
  readonly values: readonly unknown[];
}

/**
 * How a batch's appended rows are cut into statements: up to EXACT_APPENDED_ROWS rows (the common
 * batch) in one statement of exactly that many; beyond, statements of a power of two of rows up to
 * MAX_APPENDED_ROWS (well under SQLite's 32,766 variables), largest first. A table then has at most
 * 33 statement texts whatever the batch sizes, which the writer's statement cache (db.ts, 512)
 * keeps, rather than a text per size. Powers of two for every size cost about 2 % of POST /users
 * (more statements for the common batches), measured alternated.
 */
const EXACT_APPENDED_ROWS = 32;
const MAX_APPENDED_ROWS = 64;

/** The number of rows of the next statement, `left` rows remaining. */
function appendedRowsPerStatement(left: number): number {
  if (left <= EXACT_APPENDED_ROWS) return left;
  let size = MAX_APPENDED_ROWS;
  while (size > left) size /= 2;
  return size;
}

interface Batch {
  trx: ControlledTransaction<Database>;
  /** Rows the batch's kept writes appended, per table in the order the writes ended. */
  appended: Map<AppendOnlyTable, AppendedRow[]>;
  /** Settles when the batch has ended: committed (every write in it holds) or not (none does). */
  ended: Promise<void>;
  end: (err?: unknown) => void;
  over: boolean;
}

/**
 * SQLite: the writes of one turn of the event loop share one transaction (group commit).
 *
 * SQLite has one writer at a time, and much of a small write's cost is its transaction: BEGIN,
 * COMMIT writing each page it touched to the WAL, and the asynchronous hand-off of each statement.
 * Writes that arrive together (the requests read in one poll of the sockets) run one after
 * another, each inside a savepoint of one transaction, which commits in that turn's check phase
 * (setImmediate): pages that several of them touch are written once. A write whose statements
 * fail is rolled back to its savepoint alone; the others go on. No write is answered before the
 * COMMIT that holds it, and when that COMMIT fails, or SQLite ends the transaction itself (a full
 * disk, an I/O error), every write in the batch fails: each caller learns its write's real outcome.
 *
 * Rows a write appends to a log (AppendedRow) are not written inside its savepoint but kept until
 * the batch ends, then inserted together just before COMMIT, in the order the writes ended. A
 * savepoint copies each page it first changes to SQLite's sub-journal, so a change-log row and an
 * audit row written inside one cost their pages' copy for every write; measured with SQLite alone,
 * 16 writes of a user, its change and its audit row per transaction: 27-29 µs a write inside the
 * savepoint, 19-22 outside (docs/benchmarks.md, "Log rows at the batch's end"). A write rolled
 * back to its savepoint never hands its rows over; a failed insert of them fails the batch as a
 * failed COMMIT does.
 */
export class WriteBatches {
  private open: Batch | undefined;
  /** One write at a time: the tail of the queue of writers (and of batch ends). */
  private tail: Promise<void> = Promise.resolve();
  /** A write's function is running in the open batch. */
  private running = false;

  constructor(private readonly db: Db & Required<Pick<Db, 'writeSync'>>) {}

  /** Errors of writes that met another process's write and may run again in a new transaction. */
  private readonly runAgain = new WeakSet<object>();

  /**
   * Whether a write failed because another process wrote (it committed since this transaction's
   * first read, or it holds the write lock), having written nothing: it may run again in a new
   * transaction.
   */
  metAnotherWriter(err: unknown): boolean {
    return typeof err === 'object' && err !== null && this.runAgain.has(err);
  }

  /** True for the open batch's transaction while a write runs in it: its statements may run at once (Db.writeSync). */
  holds(tx: unknown): boolean {
    return this.running && tx === this.open?.trx;
  }

  /** Settles once no batch is open and no write is waiting: what closing the database waits for. */
  async idle(): Promise<void> {
    for (;;) {
      const tail = this.tail;
      await tail;
      const open = this.open;
      if (open) await open.ended.catch(() => {});
      else if (tail === this.tail) return;
    }
  }

  /**
   * Runs `fn` in the open batch (or a new one) inside a savepoint of its own; once it succeeded,
   * `appended` names the rows it appends to log tables, inserted at the batch's end.
   */
  async run<T>(
    fn: (tx: Transaction<Database>) => Promise<T>,
    appended?: () => readonly AppendedRow[],
  ): Promise<T> {
    const release = await this.turn();
    let batch: Batch;
    let result: T;
    try {
      batch = this.open ?? (await this.begin());
      this.exec('SAVEPOINT write');
      this.running = true;
      try {
        result = await fn(batch.trx);
      } catch (err) {
        this.running = false;
        try {
          this.exec('ROLLBACK TO write');
          this.exec('RELEASE write');
        } catch (undoErr) {
          // SQLite ended the whole transaction: the writes before this one in the batch are gone
          // too. They are told so now, and the writes after this one start a new batch.
          await this.finish(batch, undoErr);
        }
        // Another process writes: it committed since this transaction's first read (no write of
        // it can proceed on that snapshot), or it holds the write lock, which the writer does not
        // wait for inside SQLite (otherwriters.ts). The transaction has written nothing (its first
        // write would have taken that lock), so the writes before this one stand as they are, and
        // it ends now: the writes after this one, and this one run again (ObjectStore.write),
        // start afresh.
        if (anotherProcessWrote(err)) {
          this.runAgain.add(err as object);
          await this.finish(batch);
        }
        throw err;
      }
      this.running = false;
      try {
        this.exec('RELEASE write');
      } catch (err) {
        // Only when the transaction is gone (a function that swallowed SQLite's error): as above.
        await this.finish(batch, err);
        throw err;
      }
      for (const row of appended?.() ?? []) {
        const rows = batch.appended.get(row.into);
        if (rows) rows.push(row);
        else batch.appended.set(row.into, [row]);
      }
    } finally {
      release();
    }
    await batch.ended;
    return result;
  }

  /** Inserts the rows the batch's writes appended, a table at a time, in their order. */
  private insertAppended(batch: Batch) {
    for (const [table, rows] of batch.appended) {
      for (let at = 0; at < rows.length; ) {
        const size = appendedRowsPerStatement(rows.length - at);
        const values: unknown[] = [];
        for (let i = at; i < at + size; i++) for (const v of (rows[i] as AppendedRow).values) values.push(v);
        this.db.writeSync(table.insertOf(size), values);
        at += size;
      }
    }
    batch.appended.clear();
  }

  /** A statement of the batch's own, between writes: run at once on the writer it holds. */
  private exec(text: string) {
    this.db.writeSync(text, []);
  }

  private async turn(): Promise<() => void> {
    let release = () => {};
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const before = this.tail;
    this.tail = before.then(() => mine);
    await before;
    return release;
  }

  private async begin(): Promise<Batch> {
    const trx = await this.db.kysely.startTransaction().execute();
    let end: (err?: unknown) => void = () => {};
    const ended = new Promise<void>((resolve, reject) => {
      end = (err) => (err === undefined ? resolve() : reject(err));
    });
    // A write that failed by itself has its answer already: no unhandled rejection for it.
    ended.catch(() => {});
    const batch: Batch = { trx, appended: new Map(), ended, end, over: false };
    this.open = batch;
    setImmediate(() => void this.close(batch));
    return batch;
  }

  private async close(batch: Batch) {
    const release = await this.turn();
    try {
      await this.finish(batch);
    } finally {
      release();
    }
  }

  /** Commits the batch, or rolls it back when `lost` says why it cannot hold; called in a turn. */
  private async finish(batch: Batch, lost?: unknown) {
    if (batch.over) return;
    batch.over = true;
    if (this.open === batch) this.open = undefined;
    if (lost === undefined) {
      try {
        this.insertAppended(batch);
        await batch.trx.commit().execute();
        batch.end();
        return;
      } catch (err) {
        lost = err;
      }
    }
    await batch.trx
      .rollback()
      .execute()
      .catch(() => {});
    batch.end(lost);
  }
}
