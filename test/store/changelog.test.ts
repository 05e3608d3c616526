import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { Group } from '../../src/objects/group.js';
import { startService } from '../../src/service/start.js';
import { PRUNE_BATCH, pruneBatch, prunedThrough, startPruner } from '../../src/store/changelog.js';
import type { Db } from '../../src/store/db.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { backends, freshLocation, freshStore, readLog } from '../helpers.js';

/*
 * Change-log retention (src/store/changelog.ts): rows older than the retention go, oldest first,
 * in small batches, never the newest row, and the highest pruned sequence number is recorded so
 * a reader can tell it lost changes (the event stream's side is in test/events/resync.test.ts).
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function rows(db: Db): Promise<{ seq: number; time: number }[]> {
  const r = await db.kysely.selectFrom('changes').select(['seq', 'time']).orderBy('seq').execute();
  return r.map((x) => ({ seq: Number(x.seq), time: Number(x.time) }));
}

async function pruneAll(db: Db, before: number, batch?: number) {
  let total = 0;
  for (;;) {
    const n = await pruneBatch(db, before, batch);
    total += n;
    if (n === 0) return total;
  }
}

describe.each(backends())('change-log retention on %s', (backend) => {
  let db: Db;
  let store: ObjectStore;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, store, cleanup } = await freshStore(backend));
  });
  afterAll(async () => {
    await cleanup?.();
  });

  it('generated: deletes exactly the old end of the log, never the newest row, and records the mark', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 0, maxLength: 40 }),
        fc.integer({ min: 0, max: 120 }),
        fc.integer({ min: 1, max: 7 }),
        async (steps, cutoff, batch) => {
          await db.kysely.deleteFrom('changes').execute();
          // Times go up (writers are serialized), sometimes by nothing.
          let t = 0;
          for (const step of steps) {
            t += step;
            await db.kysely
              .insertInto('changes')
              .values({ type: 'Group', id: 'g', data: '{}', etag: '"e"', time: t })
              .execute();
          }
          const before = await rows(db);
          const markBefore = (await prunedThrough(db)).seq;
          const deleted = await pruneAll(db, cutoff, batch);
          const after = await rows(db);
          const newest = before[before.length - 1];
          // Expected: the longest prefix of rows older than the cutoff, less the newest row.
          const old: number[] = [];
          for (const r of before) {
            if (r.time >= cutoff || r === newest) break;
            old.push(r.seq);
          }
          expect(deleted).toBe(old.length);
          expect(after.map((r) => r.seq)).toEqual(
            before.filter((r) => !old.includes(r.seq)).map((r) => r.seq),
          );
          if (newest) expect(after[after.length - 1]).toEqual(newest);
          const mark = (await prunedThrough(db)).seq;
          // The mark only rises, and no row at or below it is left.
          expect(mark).toBeGreaterThanOrEqual(markBefore);
          if (old.length > 0) expect(mark).toBe(old[old.length - 1]);
          expect(after.every((r) => r.seq > mark)).toBe(true);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('the newest sequence number never goes back, so new writes never reuse a pruned one', async () => {
    const { obj } = await store.create(Group, { Name: 'last' });
    const last = await store.lastSeq();
    await pruneAll(db, Date.now() + 60_000);
    expect(await store.lastSeq()).toBe(last);
    await store.update(Group, obj.id, { Name: 'after prune' }, obj.etag);
    expect(await store.lastSeq()).toBeGreaterThan(last);
  });

  it('prunes in batches that let writes through while it runs', async () => {
    await db.kysely.deleteFrom('changes').execute();
    const n = PRUNE_BATCH * 12;
    const values = Array.from({ length: n }, () => ({
      type: 'Group',
      id: 'x',
      data: '{}',
      etag: '"e"',
      time: 1,
    }));
    for (let i = 0; i < values.length; i += 1000)
      await db.kysely
        .insertInto('changes')
        .values(values.slice(i, i + 1000))
        .execute();
    const pruner = startPruner(db, { retentionMs: 1_000, intervalMs: 3_600_000, pauseMs: 5 });
    let pruning = true;
    const done = pruner.runOnce().finally(() => {
      pruning = false;
    });
    let writesDuringPrune = 0;
    while (pruning) {
      // Requests arrive as I/O events; on SQLite a write is only microtasks, so yield like one.
      await new Promise((r) => setImmediate(r));
      await store.create(Group, { Name: `during prune ${writesDuringPrune}-${Math.random()}` });
      if (pruning) writesDuringPrune++;
    }
    expect(await done).toBeGreaterThanOrEqual(n);
    await pruner.stop();
    // One long delete would let no write in before it ends.
    expect(writesDuringPrune).toBeGreaterThan(2);
    const left = await rows(db);
    expect(left.every((r) => r.time !== 1)).toBe(true);
  });

  it('keeps everything while retention is 0 (the pruner never runs)', async () => {
    await db.kysely.deleteFrom('changes').execute();
    for (let i = 0; i < 3; i++) await store.create(Group, { Name: `kept ${i}` });
    const pruner = startPruner(db, { retentionMs: 0, intervalMs: 10 });
    await sleep(100);
    await pruner.stop();
    expect((await rows(db)).length).toBe(3);
  });
});

describe.each(backends())('gatehouse serve prunes its change log on %s', (backend) => {
  it('server.changeretention: rows older than the setting are gone within the interval', async () => {
    const loc = await freshLocation(backend);
    const config = loadServiceConfig({
      env: {
        SVC_SERVER_DATABASE: loc.location,
        SVC_SERVER_LISTEN: '127.0.0.1:0',
        SVC_SERVER_CHANGERETENTION: '1',
      },
    });
    const service = await startService(config, { announce: () => {} });
    try {
      for (let i = 0; i < 5; i++) await service.store.create(Group, { Name: `old ${i}` });
      const mark = await service.store.lastSeq();
      // Retention 1 s: the pruner looks every second.
      const deadline = Date.now() + 8_000;
      let first = 0;
      while (Date.now() < deadline) {
        const r = await readLog(service.store);
        first = r[0]?.seq ?? 0;
        if (first >= mark) break;
        await sleep(200);
      }
      // Everything up to our last write went but the newest row (which may be ours or the
      // service's own later write), and the mark says so.
      expect(first).toBeGreaterThanOrEqual(mark);
      const pruned = await sql<{ seq: string }>`SELECT seq FROM changes_pruned`.execute(
        service.store.db.kysely,
      );
      const markPruned = Number(pruned.rows[0]?.seq);
      expect(markPruned).toBeGreaterThanOrEqual(mark - 1);
      expect(markPruned).toBeLessThan(first);
    } finally {
      await service.close();
      await loc.cleanup();
    }
  });

  it('refuses a negative or non-numeric retention', () => {
    expect(() => loadServiceConfig({ env: { SVC_SERVER_CHANGERETENTION: '-1' } })).toThrow(/at least 0/);
    expect(() => loadServiceConfig({ env: { SVC_SERVER_CHANGERETENTION: '7d' } })).toThrow(/whole number/);
  });
});
