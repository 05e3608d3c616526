import SQLite from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { Group } from '../../src/objects/group.js';
import type { Db } from '../../src/store/db.js';
import { ObjectStore } from '../../src/store/objects.js';
import { WRITE_ATTEMPTS } from '../../src/store/pgwrite.js';
import { freshStore, readLog } from '../helpers.js';

/*
 * SQLite in WAL mode: a write transaction that read before it wrote fails at its first write with
 * SQLITE_BUSY_SNAPSHOT when another process (the CLI, a second service on the file) committed
 * in between; no busy timeout waits that out. The store runs such a write again on what is
 * committed now (src/store/writebatch.ts, staleSnapshot), and the writes batched with it keep
 * their outcomes. These tests put a commit of another connection exactly between a write's read
 * of its object and its first write.
 */

describe('SQLite: another process commits between a write’s read and its write', () => {
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
    afterRead = {
      id: obj.id,
      run: () => {
        afterRead = undefined;
        otherReplaces(obj.id, 'by-the-cli');
      },
    };
    const err = await store.update(Group, obj.id, { Name: 'contested', Description: 'mine' }, obj.etag).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(412);
    expect(etagOf(obj.id)).toBe('by-the-cli');
    expect((await store.get(Group, obj.id))?.data).not.toContain('mine');
  });

  it('gives up after WRITE_ATTEMPTS when every attempt meets a new commit, having written nothing', async () => {
    const { obj } = await store.create(Group, { Name: 'busy' });
    const { obj: theirs } = await store.create(Group, { Name: 'theirs' });
    let commits = 0;
    afterRead = { id: obj.id, run: () => otherReplaces(theirs.id, `cli-${++commits}`) };
    const err = await store.update(Group, obj.id, { Name: 'busy', Description: 'never' }, obj.etag).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY_SNAPSHOT');
    expect(commits).toBe(WRITE_ATTEMPTS);
    afterRead = undefined;
    expect(etagOf(obj.id)).toBe(obj.etag);
    // The store is not stuck: the next write goes through.
    await store.update(Group, obj.id, { Name: 'busy', Description: 'now' }, obj.etag);
    expect((await store.get(Group, obj.id))?.data).toContain('now');
  });
});
