import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { fixedQuery } from '../../src/store/fixed.js';
import { runBesideOtherWriters, SQLITE_BUSY_TIMEOUT_MS } from '../../src/store/otherwriters.js';
import { databaseUnavailable } from '../../src/store/unavailable.js';
import { freshStore, startTestService, type TestService } from '../helpers.js';
import { Browser, makeUser, PIN } from '../kit/index.js';

/*
 * SQLite beside another process that holds the write lock (the CLI writing the same file). The
 * service's writer waits for that lock on timers (src/store/otherwriters.ts), not in SQLite's busy
 * handler, which would hold the event loop: every request, and every timer, would stand still as
 * long as the other process kept the lock. Here the other process is a second connection in this
 * process that releases its lock on a timer: with the event loop held, it never would, and each
 * statement would fail after the whole busy timeout.
 */

/** Another process on the file: it takes the write lock and keeps it until `release`. */
function otherProcess(file: string) {
  const other = new SQLite(file);
  other.pragma('busy_timeout = 0');
  let commit: NodeJS.Timeout | undefined;
  return {
    other,
    /** Holds the write lock for `ms`, then commits a row of its own; resolves when it has. */
    holdFor(ms: number): Promise<number> {
      other.exec('BEGIN IMMEDIATE');
      other.exec("INSERT INTO scratch (who) VALUES ('other')");
      return new Promise((resolve) => {
        commit = setTimeout(() => {
          other.exec('COMMIT');
          resolve(Date.now());
        }, ms);
      });
    },
    hold() {
      other.exec('BEGIN IMMEDIATE');
    },
    close() {
      clearTimeout(commit);
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
    },
  };
}

/** Counts timer callbacks: how far the event loop ran meanwhile. */
function ticker() {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  return {
    get ticks() {
      return ticks;
    },
    stop: () => clearInterval(timer),
  };
}

const rejectionOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('SQLite: a statement or a transaction beside another process’s write lock', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let proc: ReturnType<typeof otherProcess>;
  let clock: ReturnType<typeof ticker>;

  beforeEach(async () => {
    ({ db, cleanup } = await freshStore('sqlite'));
    await sql`CREATE TABLE scratch (who TEXT NOT NULL)`.execute(db.kysely);
    proc = otherProcess(db.describe.replace(/^sqlite /, ''));
    clock = ticker();
  });
  afterEach(async () => {
    clock.stop();
    proc.close();
    await cleanup();
  });

  const rows = async () =>
    (await sql<{ who: string }>`SELECT who FROM scratch ORDER BY rowid`.execute(db.kysely)).rows.map(
      (r) => r.who,
    );

  it('a statement outside a transaction waits on timers, then runs after the other commit', async () => {
    const released = proc.holdFor(300);
    const t0 = Date.now();
    await sql`INSERT INTO scratch (who) VALUES ('service')`.execute(db.kysely);
    expect(Date.now()).toBeGreaterThanOrEqual(await released);
    expect(Date.now() - t0).toBeLessThan(SQLITE_BUSY_TIMEOUT_MS);
    // Timers ran while it waited: SQLite's busy handler would have held the event loop.
    expect(clock.ticks).toBeGreaterThan(20);
    expect(await rows()).toEqual(['other', 'service']);
  });

  it('a statement that runs at once (Db.runSync) leaves it to Kysely while the lock is held', async () => {
    const runSync = db.runSync;
    if (!runSync) throw new Error('a SQLite Db has runSync');
    proc.hold();
    // Not thrown: the caller goes the asynchronous way, which waits.
    expect(runSync("INSERT INTO scratch (who) VALUES ('never')", [])).toBeUndefined();
    proc.close();
    proc = otherProcess(db.describe.replace(/^sqlite /, ''));
    const released = proc.holdFor(200);
    // What the audit trail and the fixed statements do (fixed.ts): runSync, else through Kysely.
    const r = await fixedQuery(
      db,
      'otherwriters-test',
      () => sql`INSERT INTO scratch (who) VALUES (${'fixed'})`,
      {},
    );
    expect(r.affected).toBe(1);
    expect(Date.now()).toBeGreaterThanOrEqual(await released);
    expect(await rows()).toEqual(['other', 'fixed']);
  });

  it('a transaction that read runs again, whole, after the lock met its write, and sees the other commit', async () => {
    let runs = 0;
    let released: Promise<number> | undefined;
    const seen = await runBesideOtherWriters(db, () =>
      db.kysely.transaction().execute(async (tx) => {
        runs++;
        const before = (await sql<{ n: number }>`SELECT count(*) AS n FROM scratch`.execute(tx)).rows[0]?.n;
        // The other process takes the lock between this transaction's read and its write.
        released ??= proc.holdFor(200);
        await sql`INSERT INTO scratch (who) VALUES (${`service saw ${before}`})`.execute(tx);
        return before;
      }),
    );
    await released;
    expect(runs).toBeGreaterThan(1);
    expect(seen).toBe(1);
    expect(await rows()).toEqual(['other', 'service saw 1']);
    expect(clock.ticks).toBeGreaterThan(10);
  });

  it('a transaction whose snapshot another commit made stale runs again at once', async () => {
    let runs = 0;
    await runBesideOtherWriters(db, () =>
      db.kysely.transaction().execute(async (tx) => {
        runs++;
        await sql`SELECT count(*) FROM scratch`.execute(tx);
        if (runs === 1) proc.other.exec("INSERT INTO scratch (who) VALUES ('other')");
        await sql`INSERT INTO scratch (who) VALUES ('service')`.execute(tx);
      }),
    );
    expect(runs).toBe(2);
    expect(await rows()).toEqual(['other', 'service']);
  });

  it('gives up as SQLite’s busy timeout would, answered as an unavailable database, when the lock stays', async () => {
    proc.hold();
    const t0 = Date.now();
    const err = await rejectionOf(sql`INSERT INTO scratch (who) VALUES ('never')`.execute(db.kysely));
    const waited = Date.now() - t0;
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY');
    expect(databaseUnavailable(err)).toBe(true);
    expect(waited).toBeGreaterThanOrEqual(SQLITE_BUSY_TIMEOUT_MS);
    expect(waited).toBeLessThan(SQLITE_BUSY_TIMEOUT_MS + 2000);
    // The event loop ran throughout (a 5 ms ticker: about 1,000 ticks in 5 s, fewer on a busy host).
    expect(clock.ticks).toBeGreaterThan(200);
    // A transaction, too, and then nothing of either is there.
    const t1 = Date.now();
    const txErr = await rejectionOf(
      runBesideOtherWriters(db, () =>
        db.kysely.transaction().execute((tx) => sql`INSERT INTO scratch (who) VALUES ('never')`.execute(tx)),
      ),
    );
    expect((txErr as { code?: string }).code).toBe('SQLITE_BUSY');
    expect(Date.now() - t1).toBeGreaterThanOrEqual(SQLITE_BUSY_TIMEOUT_MS);
    proc.close();
    proc = otherProcess(db.describe.replace(/^sqlite /, ''));
    expect(await rows()).toEqual([]);
    // Nothing is stuck: the next statement goes through.
    await sql`INSERT INTO scratch (who) VALUES ('now')`.execute(db.kysely);
    expect(await rows()).toEqual(['now']);
  }, 20_000);
});

describe('SQLite: sign-in while another process holds the write lock', () => {
  let s: TestService;
  beforeEach(async () => {
    s = await startTestService('sqlite');
  });
  afterEach(async () => s?.close());

  it('a sign-in waits for the lock and succeeds, while reads are answered meanwhile', async () => {
    const email = 'beside-the-cli@example.com';
    await makeUser(s, { email, pin: PIN });
    await sql`CREATE TABLE scratch (who TEXT NOT NULL)`.execute(s.db.kysely);
    const proc = otherProcess(s.db.describe.replace(/^sqlite /, ''));
    try {
      const b = new Browser(s, { ip: '10.9.8.7' });
      const released = proc.holdFor(400);
      // Creating the session, counting the attempt, raising the session's level and the audit
      // entries all write; each waits for the lock.
      const signIn = (async () => {
        const first = await b.post('/auth/email', { email });
        const second = await b.post('/auth/pin', { code: PIN });
        return [first.statusCode, second.statusCode, Date.now()];
      })();
      // A read is answered while the sign-in waits: the event loop is not held.
      const read = await s.req({ url: '/users/me' });
      const readAt = Date.now();
      expect(read.statusCode).toBe(200);
      const releasedAt = await released;
      expect(readAt).toBeLessThan(releasedAt);
      const [first, second, doneAt] = (await signIn) as number[];
      expect([first, second]).toEqual([204, 204]);
      expect(doneAt).toBeGreaterThanOrEqual(releasedAt);
      expect((await b.req({ url: '/users/me' })).json().Email).toBe(email);
    } finally {
      proc.close();
    }
  });
});
