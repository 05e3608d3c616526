import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledQuery } from 'kysely';
import {
  type DatabaseConnection,
  type QueryResult,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
} from 'kysely';

/*
 * SQLite beside another process that writes the same file (the CLI, a second service on it).
 *
 * SQLite's own busy timeout waits for another process's write lock by sleeping inside the
 * statement: in Node.js that holds the event loop, so every request of the service stood still
 * for as long as the CLI held the lock (up to the whole timeout). The service's writer connection
 * therefore waits in SQLite for nothing (busy_timeout 0, db.ts): a statement that meets the lock
 * fails at once with SQLITE_BUSY, having done nothing, and runs again here after a pause on a
 * timer, for as long as SQLite's timeout would have waited. Three places run again:
 * - a statement outside a transaction (an audit entry, a session, a sign-in counter): the
 *   Kysely driver below, and Db.runSync's callers, which fall back to it;
 * - an object write: the store runs the whole write again (writebatch.ts, objects.ts);
 * - any other write transaction: its caller runs it again with runBesideOtherWriters.
 */

/**
 * How long a SQLite write waits for another process's write lock before it fails (and the
 * request is answered 503): the reader's busy timeout, and the writer's bound on running again.
 */
export const SQLITE_BUSY_TIMEOUT_MS = 5000;

/**
 * SQLITE_BUSY_SNAPSHOT: a write met a snapshot another process's commit made stale (WAL mode; a
 * transaction that read before it wrote). No busy timeout waits it out, but the write can run
 * again in a new transaction, which reads what that process committed.
 */
export function staleSnapshot(err: unknown): boolean {
  return codeOf(err) === 'SQLITE_BUSY_SNAPSHOT';
}

/**
 * SQLITE_BUSY (or its recovery variant): another connection held the lock the statement needed,
 * and the statement did nothing.
 */
export function lockedByAnother(err: unknown): boolean {
  const code = codeOf(err);
  return code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_RECOVERY';
}

/** Either way another process's write stood in the way: a new transaction may go through. */
export const anotherProcessWrote = (err: unknown) => lockedByAnother(err) || staleSnapshot(err);

const codeOf = (err: unknown) => (err as { code?: unknown } | null)?.code;

/**
 * Runs `attempt`, and again while it fails because another process writes (`again`): at once
 * after a first stale snapshot (the other process has committed; a new snapshot sees it), else
 * after a pause growing from 2 ms to 100 ms. After SQLITE_BUSY_TIMEOUT_MS it gives up with the
 * last error, which is answered 503 (unavailable.ts). The pauses are timers: the event loop runs.
 */
export async function whileAnotherWrites<T>(
  attempt: () => Promise<T>,
  again: (err: unknown) => boolean,
): Promise<T> {
  const until = Date.now() + SQLITE_BUSY_TIMEOUT_MS;
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (!again(err) || Date.now() >= until) throw err;
      if (n > 1 || !staleSnapshot(err)) await sleep(Math.min(2 ** n, 100));
    }
  }
}

/**
 * A write transaction other than an object write (those run again in the store): on SQLite it
 * runs again, whole, while another process's write stands in its way. `run` must start the
 * transaction and do nothing outside it that a second run would repeat wrongly. PostgreSQL waits
 * for its row locks in the server, without blocking the event loop: there it runs once.
 */
export function runBesideOtherWriters<T>(
  db: { dialect: 'sqlite' | 'postgres' },
  run: () => Promise<T>,
): Promise<T> {
  return db.dialect === 'sqlite' ? whileAnotherWrites(run, anotherProcessWrote) : run();
}

/**
 * Kysely's SQLite dialect whose statements outside a transaction run again while another process
 * holds the write lock. A statement inside a transaction fails as it is: the transaction's owner
 * runs the whole transaction again (a statement that has read cannot just be repeated: it would
 * meet a stale snapshot).
 */
export class BesideOtherWritersDialect extends SqliteDialect {
  constructor(
    private readonly settings: SqliteDialectConfig,
    private readonly inTransaction: () => boolean,
  ) {
    super(settings);
  }

  override createDriver() {
    return new BesideOtherWritersDriver(this.settings, this.inTransaction);
  }
}

class BesideOtherWritersDriver extends SqliteDriver {
  private readonly wrapped = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(
    settings: SqliteDialectConfig,
    private readonly inTransaction: () => boolean,
  ) {
    super(settings);
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    let patient = this.wrapped.get(connection);
    if (!patient) {
      patient = {
        executeQuery: <R>(query: CompiledQuery): Promise<QueryResult<R>> =>
          whileAnotherWrites(
            () => connection.executeQuery<R>(query),
            (err) => lockedByAnother(err) && !this.inTransaction(),
          ),
        streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
      };
      this.wrapped.set(connection, patient);
    }
    return patient;
  }
}
