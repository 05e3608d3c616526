import SQLite from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { Group } from '../../src/objects/group.js';
import type { Db } from '../../src/store/db.js';
import { ObjectStore } from '../../src/store/objects.js';
import { SQLITE_BUSY_TIMEOUT_MS } from '../../src/store/otherwriters.js';
import { databaseUnavailable } from '../../src/store/unavailable.js';
import { freshStore, readLog } from '../helpers.js';

/*
 * SQLite in WAL mode: a write transaction that read before it wrote fails at its first write with
 * SQLITE_BUSY_SNAPSHOT when another process (the CLI, a second service on the file) committed
 * in between, and with SQLITE_BUSY at once, without waiting, while that process holds the write
 * lock; no busy timeout waits either out. The store runs such a write again on what is committed
 * now (src/store/writebatch.ts, metAnotherWriter; polling while the lock is held), and the
 * writes batched with it keep their outcomes. These tests put another connection's commit, or
 * its lock, exactly between a write's read of its object and its first write.
 */

describe('SQLite: another process writes between a write’s read and its write', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let store: ObjectStore;
  /** Another process on the same file, which waits for no lock at all. */
  let other: SQLite.Database;
  /** Runs after every read of the object `id` inside a write, while it is set. */
  let afterRead: { id: string; run: () => void } | undefined;

  beforeEach(async () => {
    ({ db, cleanup } = await freshStore('sqlite'));
    const writeSync = db.writeSync;
    if (!writeSync) throw new Error('a SQLite Db has writeSync');
    store = new ObjectStore({
      ...db,
      writeSync: (text, params) => {
        const result = writeSync(text, params);
        const hook = afterRead;
        if (hook && /^\s*select\b/i.test(text) && /"objects"/.test(text) && params.includes(hook.id))
          hook.run();
        return result as never;
      },
    });
    other = new SQLite(db.describe.replace(/^sqlite /, ''));
    other.pragma('busy_timeout = 0');
  });
  afterEach(async () => {
    afterRead = undefined;
    other.close();
    await store.settled();
    await cleanup();
  });

  /** What the other process does: it gives an object a new ETag (as its own update would). */
  const otherReplaces = (id: string, etag: string) =>
    other.prepare('UPDATE objects SET etag = ? WHERE type = ? AND id = ?').run(etag, Group.kind, id);

  const etagOf = (id: string) =>
    (
      other.prepare('SELECT etag FROM objects WHERE type = ? AND id = ?').get(Group.kind, id) as {
        etag: string;
      }
    ).etag;

  /** Runs `run` once, after the next read of the object `id` inside a write. */
  const onceAfterRead = (id: string, run: () => void) => {
    afterRead = {
      id,
      run: () => {
        afterRead = undefined;
        run();
      },
    };
  };

  /** What a promise was rejected with (undefined when it was fulfilled). */
  const rejectionOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e,
    );

  it('runs the write again: it holds, the other process’s commit holds, and so do the writes batched with it', async () => {
    const { obj: mine } = await store.create(Group, { Name: 'mine' });
    const { obj: same } = await store.create(Group, { Name: 'same' });
    const { obj: theirs } = await store.create(Group, { Name: 'theirs' });
    let commits = 0;
    afterRead = {
      id: mine.id,
      run: () => {
        if (commits++ === 0) otherReplaces(theirs.id, 'by-the-cli');
      },
    };
    // One turn: a write that only reads (unchanged), the write that meets the stale snapshot, a
    // creation after it.
    const results = await Promise.allSettled([
      store.update(Group, same.id, { Name: 'same' }, same.etag),
      store.update(Group, mine.id, { Name: 'mine', Description: 'changed' }, mine.etag),
      store.create(Group, { Name: 'after' }),
    ]);
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual([
      'ok',
      'ok',
      'ok',
    ]);
    // The other process committed between the first read and the write: that is what the retry was for.
    expect(commits).toBe(2);
    const [unchanged, changed] = results as PromiseFulfilledResult<{
      changed: boolean;
      obj: { etag: string };
    }>[];
    expect(unchanged?.value.changed).toBe(false);
    expect(changed?.value.changed).toBe(true);
    expect((await store.get(Group, mine.id))?.data).toContain('changed');
    expect(etagOf(mine.id)).toBe(changed?.value.obj.etag);
    expect(etagOf(theirs.id)).toBe('by-the-cli');
    const log = await readLog(store);
    expect(log.filter((c) => c.id === mine.id).map((c) => c.etag)).toEqual([
      mine.etag,
      changed?.value.obj.etag,
    ]);
    expect(log.filter((c) => c.data?.includes('"after"'))).toHaveLength(1);
  });

  it('answers 412, not 503, when the other process replaced the object itself', async () => {
    const { obj } = await store.create(Group, { Name: 'contested' });
    onceAfterRead(obj.id, () => {
      otherReplaces(obj.id, 'by-the-cli');
    });
    const err = await rejectionOf(
      store.update(Group, obj.id, { Name: 'contested', Description: 'mine' }, obj.etag),
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(412);
    expect(etagOf(obj.id)).toBe('by-the-cli');
    expect((await store.get(Group, obj.id))?.data).not.toContain('mine');
  });

  it('gives up as SQLite’s busy timeout would when every attempt meets a new commit, having written nothing', async () => {
    const { obj } = await store.create(Group, { Name: 'busy' });
    const { obj: theirs } = await store.create(Group, { Name: 'theirs' });
    let commits = 0;
    afterRead = { id: obj.id, run: () => otherReplaces(theirs.id, `cli-${++commits}`) };
    const t0 = Date.now();
    const err = await rejectionOf(
      store.update(Group, obj.id, { Name: 'busy', Description: 'never' }, obj.etag),
    );
    const waited = Date.now() - t0;
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY_SNAPSHOT');
    expect(databaseUnavailable(err)).toBe(true);
    expect(waited).toBeGreaterThanOrEqual(SQLITE_BUSY_TIMEOUT_MS);
    expect(waited).toBeLessThan(SQLITE_BUSY_TIMEOUT_MS + 2000);
    // It tried again and again, pausing between tries rather than spinning.
    expect(commits).toBeGreaterThan(10);
    expect(commits).toBeLessThan(200);
    afterRead = undefined;
    expect(etagOf(obj.id)).toBe(obj.etag);
    // The store is not stuck: the next write goes through.
    await store.update(Group, obj.id, { Name: 'busy', Description: 'now' }, obj.etag);
    expect((await store.get(Group, obj.id))?.data).toContain('now');
  }, 15_000);

  it('waits, without blocking the event loop, for a write lock the other process holds, then writes', async () => {
    const { obj } = await store.create(Group, { Name: 'waits' });
    const { obj: theirs } = await store.create(Group, { Name: 'theirs' });
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    let released = 0;
    onceAfterRead(obj.id, () => {
      // The other process takes the write lock now and keeps it for 300 ms, then commits.
      other.exec('BEGIN IMMEDIATE');
      otherReplaces(theirs.id, 'by-the-cli');
      setTimeout(() => {
        other.exec('COMMIT');
        released = Date.now();
      }, 300);
    });
    try {
      const done = await store.update(Group, obj.id, { Name: 'waits', Description: 'after' }, obj.etag);
      expect(released).toBeGreaterThan(0);
      expect(Date.now()).toBeGreaterThanOrEqual(released);
      expect(done.changed).toBe(true);
      expect(etagOf(obj.id)).toBe(done.obj.etag);
      expect(etagOf(theirs.id)).toBe('by-the-cli');
      // Timers ran while it waited: SQLite's own busy wait would have held the event loop.
      expect(ticks).toBeGreaterThan(10);
    } finally {
      clearInterval(ticker);
    }
  });

  it('gives up as SQLite’s busy timeout would, answered as an unavailable database, when the lock stays', async () => {
    const { obj } = await store.create(Group, { Name: 'locked' });
    onceAfterRead(obj.id, () => {
      other.exec('BEGIN IMMEDIATE');
    });
    const t0 = Date.now();
    const err = await rejectionOf(
      store.update(Group, obj.id, { Name: 'locked', Description: 'never' }, obj.etag),
    );
    const waited = Date.now() - t0;
    other.exec('ROLLBACK');
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY');
    expect(databaseUnavailable(err)).toBe(true);
    expect(waited).toBeGreaterThanOrEqual(SQLITE_BUSY_TIMEOUT_MS);
    expect(waited).toBeLessThan(SQLITE_BUSY_TIMEOUT_MS + 2000);
    expect(etagOf(obj.id)).toBe(obj.etag);
  }, 15_000);
});
