import { chmodSync, closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { type Generated, Kysely, PostgresDialect, type SqliteDatabase, sql } from 'kysely';
import pg from 'pg';
import { DEFAULT_CHECKPOINT_PAGES, startCheckpointer, WRITER_CHECKPOINT_PAGES } from './checkpointer.js';
import { BesideOtherWritersDialect, lockedByAnother, SQLITE_BUSY_TIMEOUT_MS } from './otherwriters.js';
import { namePreparedStatements, resultTypeChanged, StatementNames } from './pgstatements.js';
import { walIndexVersion } from './walversion.js';

export interface ObjectsTable {
  type: string;
  id: string;
  /** The object's JSON as served. */
  data: string;
  etag: string;
  create_time: number;
  modify_time: number;
  /** Hidden per-object state (hashes) as JSON; never served. */
  secret: string | null;
}

export interface ChangesTable {
  seq: Generated<number>;
  type: string;
  id: string;
  /** The object's JSON after the change; null for a delete. */
  data: string | null;
  etag: string;
  time: number;
}

export interface ObjectKeysTable {
  type: string;
  name: string;
  value: string;
  id: string;
}

export interface Database {
  objects: ObjectsTable;
  changes: ChangesTable;
  object_keys: ObjectKeysTable;
}

export type Dialect = 'sqlite' | 'postgres';

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  /** A short description for logs, without credentials. */
  describe: string;
  /** PostgreSQL only: the pool, whose options open dedicated connections (LISTEN in src/events). */
  pool?: pg.Pool;
  /**
   * SQLite only: runs a read-only statement synchronously on a connection of its own. In WAL mode
   * it sees exactly the committed data, never another request's open transaction, and skips the
   * async connection hand-off that costs more than a primary-key lookup.
   */
  readSync?: <R>(sql: string, parameters: readonly unknown[]) => R[];
  /**
   * SQLite only: runs a statement at once: reads on the reader connection, whatever the writer
   * holds open; writes on the writer, unless a transaction is open on it (then undefined: the
   * caller goes through Kysely, which queues it after that transaction as before). A write run here is its own
   * transaction, exactly as when Kysely runs it outside one; it only skips the hand-off.
   */
  runSync?: <R>(sql: string, parameters: readonly unknown[]) => { rows: R[]; affected: number } | undefined;
  /**
   * SQLite only: runs a statement at once on the writer connection, whatever is open on it. Only
   * for the holder of the writer's open transaction (writebatch.ts), who runs exactly what Kysely
   * would run on that connection, without its asynchronous hand-off per statement.
   */
  writeSync?: <R>(sql: string, parameters: readonly unknown[]) => { rows: R[]; affected: number };
  /**
   * SQLite only: a number that changes whenever any connection, of this process or another, has
   * committed since the last call: read from the wal-index header (walversion.ts), or else
   * `PRAGMA data_version` on the reader connection, which never writes and never holds a
   * transaction open, so its own commits cannot hide anyone's.
   */
  readVersion?: () => number;
  close(): Promise<void>;
}

/**
 * Kysely prepares a statement for every query; preparing costs more than running a primary-key
 * lookup. Statements are reusable, and Kysely runs one query at a time per SQLite connection, so
 * the same SQL text can share one. Bounded, because filters make list SQL vary.
 */
function cachingStatements(
  sqlite: SQLite.Database,
): SqliteDatabase & { prepare(sql: string): SQLite.Statement } {
  const cache = new Map<string, SQLite.Statement>();
  // On some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY in COMMIT) SQLite has
  // already rolled the transaction back by itself. Kysely's ROLLBACK then fails with "no transaction
  // is active", and that error replaces the real one: a full disk would answer 500 instead of 503.
  // A ROLLBACK with no transaction open does nothing instead.
  const rollback = sqlite.prepare('rollback');
  const rollbackIfOpen = {
    reader: false,
    run: () => (sqlite.inTransaction ? rollback.run() : { changes: 0, lastInsertRowid: 0 }),
  };
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      if (sql === 'rollback') return rollbackIfOpen as unknown as SQLite.Statement;
      let stmt = cache.get(sql);
      if (!stmt) {
        if (cache.size >= 512) cache.clear();
        stmt = sqlite.prepare(sql);
        cache.set(sql, stmt);
      }
      return stmt;
    },
  };
}

// int8 columns (sequence numbers, millisecond times) fit in a double.
pg.types.setTypeParser(20, Number);

/**
 * SQLite's page cache per connection, in KiB (two connections: the writer and the reader). It
 * fills as the database grows and is then reused: the process's memory rises by up to twice this
 * while it warms and then stays flat (bench/soak.mjs). better-sqlite3's own default is 16,000 KiB,
 * which made that rise (up to 32 MB) look like a creep of several MB a minute until both were full.
 */
export const SQLITE_CACHE_KIB = 8_000;

/** How long a request waits for a PostgreSQL connection before it fails with 503. */
export const CONNECT_TIMEOUT_MS = 5_000;

/** How long a PostgreSQL statement may go unanswered by default (server.databasetimeout). */
export const QUERY_TIMEOUT_MS = 10_000;

/** node-postgres's words when a statement outlived query_timeout. */
export const QUERY_TIMEOUT_MESSAGE = 'Query read timeout';

/**
 * Closes the connection after a statement that leaves it unusable: what follows on it fails at
 * once, and the pool discards it when it is handed back (Kysely hands its connections back
 * without the error; pool.query discards one whose statement failed by itself):
 * - unanswered for query_timeout: the connection cannot be trusted (a network cut leaves the
 *   socket open and silent: no reset, no error). node-postgres fails the statement but keeps the
 *   connection, so the next statement on it (the transaction's ROLLBACK, the next request's
 *   query) would wait just as long;
 * - a prepared statement whose result columns changed (pgstatements.ts): it fails on that
 *   connection every time it runs.
 */
export function dropUnusable(client: pg.Client) {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const result = query(...args);
    if (result instanceof Promise)
      result.catch((err: unknown) => {
        if ((err instanceof Error && err.message === QUERY_TIMEOUT_MESSAGE) || resultTypeChanged(err)) {
          const c = client as unknown as { _queryable: boolean; connection: { stream: { destroy(): void } } };
          // Marked at once: the pool checks it when the connection is handed back, which the
          // caller may do before the socket's close has been noticed.
          c._queryable = false;
          c.connection.stream.destroy();
        }
      });
    return result;
  };
}

export const isPostgresUrl = (s: string) => /^postgres(ql)?:\/\//i.test(s);

interface OpenOptions {
  poolSize?: number;
  onConnectionError?: (err: Error) => void;
  queryTimeoutMs?: number;
  /** SQLite: checkpoint in a worker thread, not in the writer's commits (checkpointer.ts). */
  backgroundCheckpoints?: boolean;
}

function openPostgres(location: string, opts: OpenOptions): Db {
  const pool = new pg.Pool({
    connectionString: location,
    max: opts.poolSize ?? 10,
    // While the database is down, a request waits this long for a connection, then fails (503)
    // instead of hanging.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    // A statement left unanswered (a network cut) fails after this, and its connection with it.
    query_timeout: opts.queryTimeoutMs ?? QUERY_TIMEOUT_MS,
    // The server's side of the same cut: a backend whose client went silent inside a transaction
    // would keep its row locks (and, at COMMIT, the change-log ordering lock) until TCP gave up
    // on it (hours); it ends the session.
    idle_in_transaction_session_timeout: opts.queryTimeoutMs ?? QUERY_TIMEOUT_MS,
    // Idle connections across a cut are found by TCP keep-alive rather than by the next request.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // A connection that dies (server restart, terminated backend) emits 'error'; with no listener
  // that would crash the process. The pool discards an idle one and opens another on next use; a
  // checked-out one fails its query (the request answers 503) and is discarded on release, since
  // it is no longer queryable.
  const names = new StatementNames();
  pool.on('connect', (client) => {
    client.on('error', (err) => opts.onConnectionError?.(err));
    namePreparedStatements(client, names);
    dropUnusable(client);
  });
  // The pool repeats an idle client's error as its own; the client's listener has logged it.
  pool.on('error', () => {});
  const url = new URL(location);
  url.password = '';
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    kysely,
    dialect: 'postgres',
    describe: `postgres ${url.host}${url.pathname}`,
    pool,
    close: () => kysely.destroy(),
  };
}

export function openDb(location: string, opts: OpenOptions = {}): Db {
  if (isPostgresUrl(location)) return openPostgres(location, opts);
  if (location !== ':memory:') prepareSqliteFile(location);
  const sqlite = new SQLite(location);
  // WAL lets readers run beside the writer; NORMAL sync is durable across process crashes.
  const wal = sqlite.pragma('journal_mode = WAL', { simple: true }) === 'wal';
  sqlite.pragma('synchronous = NORMAL');
  // The writer never waits inside SQLite for another process's lock: that wait would hold the
  // event loop. Its statements fail at once and run again on timers (otherwriters.ts).
  sqlite.pragma('busy_timeout = 0');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
  const writer = cachingStatements(sqlite);
  const kysely = new Kysely<Database>({
    dialect: new BesideOtherWritersDialect({ database: writer }, () => sqlite.inTransaction),
  });
  const writeSync = <R>(text: string, parameters: readonly unknown[]) => {
    const stmt = writer.prepare(text);
    // RETURNING makes a write a reader.
    if (!stmt.reader) return { rows: [] as R[], affected: Number(stmt.run(parameters).changes) };
    const rows = stmt.all(parameters) as R[];
    return { rows, affected: rows.length };
  };
  const base = { kysely, dialect: 'sqlite' as const, describe: `sqlite ${location}`, writeSync };
  // An in-memory database cannot be opened twice: it reads through Kysely like PostgreSQL does.
  if (location === ':memory:') return { ...base, close: () => kysely.destroy() };
  // A second connection for reads: in WAL mode it sees committed data only.
  const reader = new SQLite(location);
  reader.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  reader.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
  const statements = cachingStatements(reader);
  const readSync = <R>(text: string, parameters: readonly unknown[]) =>
    statements.prepare(text).all(parameters) as R[];
  const dataVersion = reader.prepare('PRAGMA data_version').pluck();
  const askSqlite = () => dataVersion.get() as number;
  // Without WAL (a file system without shared memory) there is no wal-index to read.
  const walVersion = wal
    ? walIndexVersion(resolve(location), askSqlite)
    : { version: askSqlite, close: () => {} };
  const checkpointer =
    wal && opts.backgroundCheckpoints
      ? startCheckpointer(resolve(location), (err) => {
          if (sqlite.open) sqlite.pragma(`wal_autocheckpoint = ${DEFAULT_CHECKPOINT_PAGES}`);
          opts.onConnectionError?.(err ?? new Error('the SQLite checkpoint worker stopped'));
        })
      : undefined;
  if (checkpointer) sqlite.pragma(`wal_autocheckpoint = ${WRITER_CHECKPOINT_PAGES}`);
  return {
    ...base,
    readSync,
    readVersion: walVersion.version,
    runSync: <R>(text: string, parameters: readonly unknown[]) => {
      // A select reads committed data on the reader, as readSync, also while the writer holds a
      // transaction (a batch of writes not yet answered: writebatch.ts).
      if (/^\s*select\b/i.test(text)) return { rows: readSync<R>(text, parameters), affected: 0 };
      if (sqlite.inTransaction) return undefined;
      try {
        return writeSync<R>(text, parameters);
      } catch (err) {
        // Another process holds the write lock: the caller goes through Kysely, which waits for
        // it on timers (otherwriters.ts).
        if (lockedByAnother(err)) return undefined;
        throw err;
      }
    },
    close: async () => {
      // The worker's connection first: the writer, closed last, checkpoints and removes the WAL.
      await checkpointer?.close();
      await kysely.destroy();
      walVersion.close();
      reader.close();
    },
  };
}

/** Group and others: no bit of theirs on the database's files (it holds the key sealing TOTP secrets). */
const PRIVATE_FILE = 0o600;
const PRIVATE_FOLDER = 0o700;

/**
 * The database file exists, readable and writable by its owner only, before SQLite opens it:
 * SQLite gives the -wal and -shm files it creates the main file's permissions, so all three are
 * 0600. The folder, when it is created here, is 0700. A file of an earlier version made with the
 * default 0644 (and its -wal and -shm) is tightened too. A folder that already existed keeps its
 * mode: it is the operator's.
 */
function prepareSqliteFile(location: string) {
  const folder = dirname(location);
  if (!existsSync(folder)) mkdirSync(folder, { recursive: true, mode: PRIVATE_FOLDER });
  if (!existsSync(location)) closeSync(openSync(location, 'a', PRIVATE_FILE));
  for (const file of [location, `${location}-wal`, `${location}-shm`]) {
    try {
      if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, PRIVATE_FILE);
    } catch {
      // Absent (-wal, -shm before the first write), or another owner's: SQLite reports what matters.
    }
  }
}

/** Does this SQLite database exist (a file, for the commands that must not create one)? */
export const sqliteFileExists = (location: string) => location === ':memory:' || existsSync(location);

/**
 * A consistent copy of a SQLite database to `file`, while the service runs and writes: VACUUM
 * INTO reads one snapshot (a single read transaction, never restarted by concurrent writes as the
 * page-by-page backup API is), so the copy holds exactly the transactions committed before it
 * began. It is written to a private temporary file beside `file` and renamed over it at the end,
 * so `file` is never a half-written database.
 */
export async function backupSqlite(db: Db, file: string): Promise<void> {
  if (db.dialect !== 'sqlite') throw new Error('backupSqlite: not a SQLite database');
  const tmp = `${file}.partial-${process.pid}`;
  closeSync(openSync(tmp, 'wx', PRIVATE_FILE));
  try {
    await sql`VACUUM INTO ${tmp}`.execute(db.kysely);
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}
