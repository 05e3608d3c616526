import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Group } from '../../src/objects/group.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { RowCache } from '../../src/store/rowcache.js';
import { twoStores } from '../helpers.js';

/*
 * On SQLite, `ObjectStore.get` keeps the rows it read while nothing at all is committed
 * (src/store/rowcache.ts). Unlike the caches with a lifetime, it must never answer with a row
 * older than the last commit, whoever made it: this process, another connection, another process.
 */
describe('the row cache of SQLite reads', () => {
  let a: ObjectStore;
  /** Another connection to the same file, as another process's would be. */
  let b: ObjectStore;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ a, b, close: cleanup } = await twoStores('sqlite'));
  });
  afterAll(async () => cleanup?.());

  const name = async (store: ObjectStore, id: string) => (await store.get(Group, id))?.doc.Description;
  const rename = async (store: ObjectStore, id: string, Description: string) => {
    const cur = await store.get(Group, id);
    if (!cur) throw new Error(`no group ${id}`);
    await store.update(Group, id, { Description }, cur.etag);
  };

  it('reads the database once while nothing is committed', async () => {
    const { obj } = await a.create(Group, { Description: 'once' });
    const reads = vi.spyOn(a.db, 'readSync');
    try {
      for (let i = 0; i < 5; i++) expect(await name(a, obj.id)).toBe('once');
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      reads.mockRestore();
    }
  });

  it("answers with this process's and another connection's commits at once", async () => {
    const { obj } = await a.create(Group, { Description: 'first' });
    expect(await name(a, obj.id)).toBe('first');
    await rename(a, obj.id, 'renamed here');
    expect(await name(a, obj.id)).toBe('renamed here');
    await rename(b, obj.id, 'renamed there');
    expect(await name(a, obj.id)).toBe('renamed there');
    await b.delete(Group, obj.id, (await b.get(Group, obj.id))?.etag ?? '');
    expect(await a.get(Group, obj.id)).toBeUndefined();
  });

  /**
   * Makes a's next read, once it has its rows and before they are kept, run `meanwhile`: another
   * connection's commit of `Description`, then whatever else the test does at that moment.
   * Returns the restore of a's reader.
   */
  const onNextRead = (id: string, Description: string, meanwhile: () => void = () => {}) => {
    const read = a.db.readSync;
    if (!read) throw new Error('SQLite has a synchronous reader');
    let done = false;
    const reads = vi.spyOn(a.db, 'readSync').mockImplementation(((
      text: string,
      params: readonly unknown[],
    ) => {
      const rows = read(text, params);
      if (!done) {
        done = true;
        b.db.runSync?.(`UPDATE objects SET data = json_set(data, '$.Description', ?) WHERE id = ?`, [
          Description,
          id,
        ]);
        meanwhile();
      }
      return rows;
    }) as typeof read);
    return () => reads.mockRestore();
  };

  it('never keeps a row read before a commit it did not see', async () => {
    const { obj } = await a.create(Group, { Description: 'before' });
    // The read returns, then another connection commits before the row is kept.
    const restore = onNextRead(obj.id, 'after');
    try {
      expect(await name(a, obj.id)).toBe('before');
      expect(await name(a, obj.id)).toBe('after');
    } finally {
      restore();
    }
  });

  it('does not let a slow read overwrite what a read after a commit kept', async () => {
    const { obj } = await a.create(Group, { Description: 'old' });
    let second: Promise<unknown> | undefined;
    // The first read returns the old row; before it is kept, another connection commits and a
    // second read sees the commit, reads the new row and keeps it first.
    const restore = onNextRead(obj.id, 'new', () => {
      second = name(a, obj.id);
    });
    try {
      expect(await name(a, obj.id)).toBe('old');
      expect(await second).toBe('new');
      expect(await name(a, obj.id)).toBe('new');
    } finally {
      restore();
    }
  });

  it('hands every reader its own document', async () => {
    const { obj } = await a.create(Group, { Description: 'own copy' });
    const first = await a.get(Group, obj.id);
    if (!first) throw new Error('just created');
    first.doc.Description = 'changed by one request';
    expect(await name(a, obj.id)).toBe('own copy');
  });

  it('any interleaving of writes here and elsewhere: every read answers the last commit', async () => {
    const { obj } = await a.create(Group, { Description: 'v0' });
    let last = 'v0';
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom('write here', 'write there', 'read'), { maxLength: 30 }),
        async (ops) => {
          for (const op of ops) {
            if (op === 'read') {
              expect(await name(a, obj.id)).toBe(last);
              continue;
            }
            last = `v${++n}`;
            await rename(op === 'write here' ? a : b, obj.id, last);
          }
          expect(await name(a, obj.id)).toBe(last);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('reads gathered in one turn ask once and read the rows not kept in one statement, and see the other connection’s commits', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await a.create(Group, { Description: `g${i}` })).obj.id);
    const all = async () => Promise.all(ids.map((id) => name(a, id)));
    const reads = vi.spyOn(a.db, 'readSync');
    try {
      expect(await all()).toEqual(['g0', 'g1', 'g2', 'g3', 'g4']);
      expect(reads).toHaveBeenCalledTimes(1);
      expect(await all()).toEqual(['g0', 'g1', 'g2', 'g3', 'g4']);
      expect(reads).toHaveBeenCalledTimes(1);
      await rename(b, ids[2] as string, 'renamed there');
      reads.mockClear();
      expect(await all()).toEqual(['g0', 'g1', 'renamed there', 'g3', 'g4']);
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      reads.mockRestore();
    }
    // A commit elsewhere while the gathered rows are read: they answer the reads asked before it,
    // and are not kept for the reads after it.
    const restore = onNextRead(ids[4] as string, 'meanwhile');
    try {
      await rename(a, ids[0] as string, 'here');
      expect(await all()).toEqual(['here', 'g1', 'renamed there', 'g3', 'g4']);
    } finally {
      restore();
    }
    expect(await all()).toEqual(['here', 'g1', 'renamed there', 'g3', 'meanwhile']);
  });

  it('starts again empty when full', () => {
    let version = 1;
    const cache = new RowCache<string>(() => version);
    const { at } = cache.lookup('Group', 'x');
    for (let i = 0; i < 6000; i++) cache.keep('Group', `g${i}`, `row ${i}`, at);
    expect(cache.lookup('Group', 'g5999').row).toBe('row 5999');
    expect(cache.lookup('Group', 'g0').row).toBeUndefined();
    version = 2;
    expect(cache.lookup('Group', 'g5999').row).toBeUndefined();
  });
});
