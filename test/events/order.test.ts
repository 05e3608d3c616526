import fc from 'fast-check';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { ChangeTailer } from '../../src/events/tailer.js';
import { Group } from '../../src/objects/group.js';
import { type Db, openDb } from '../../src/store/db.js';
import { isAfter, LOG_START, type LogPosition } from '../../src/store/logposition.js';
import { migrate } from '../../src/store/migrations.js';
import { type Change, ObjectStore } from '../../src/store/objects.js';
import { backends, freshLocation, readLog } from '../helpers.js';

/**
 * The change log's order under concurrent writers on several instances sharing one database
 * (src/store/pgwrite.ts): every instance's tailer must deliver every committed change exactly
 * once, all tailers in the same order, the log's (src/store/logposition.ts); on PostgreSQL also
 * across LISTEN connections terminated mid-run (the tailer reconnects and catches up).
 */

interface Node {
  db: Db;
  store: ObjectStore;
  tailer: ChangeTailer;
  seen: Change[];
}

/** One writer's step: create a group, or update or delete one it created (by index, modulo). */
type Op = { kind: 'create' } | { kind: 'update'; pick: number } | { kind: 'delete'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'create' } as const) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('update' as const), pick: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), pick: fc.nat(20) }) },
);

/**
 * Several processes writing one SQLite file are not a supported deployment (a writer that read
 * first gets SQLITE_BUSY at once): on SQLite one instance's concurrent writers are checked.
 */
const instancesOn = (backend: string) => (backend === 'postgres' ? 3 : 1);

describe.each(backends())('change-log order with concurrent writers on %s', (backend) => {
  const nodes: Node[] = [];
  let cleanup: () => Promise<void>;
  let dbName = '';

  beforeAll(async () => {
    const loc = await freshLocation(backend);
    cleanup = loc.cleanup;
    if (backend === 'postgres') dbName = new URL(loc.location).pathname.slice(1);
    for (let i = 0; i < instancesOn(backend); i++) {
      const db = openDb(loc.location);
      await migrate(db);
      const store = new ObjectStore(db);
      const seen: Change[] = [];
      const tailer = new ChangeTailer(
        store,
        (batch) => seen.push(...batch),
        () => false,
        pino({ level: 'silent' }),
        // Small batches, so a catch-up spans several reads.
        { pollIntervalMs: backend === 'sqlite' ? 50 : 500, batchSize: 7 },
      );
      await tailer.start();
      nodes.push({ db, store, tailer, seen });
    }
  });
  afterAll(async () => {
    for (const n of nodes) {
      await n.tailer.close();
      await n.db.close();
    }
    await cleanup?.();
  });

  /** Ends the LISTEN connections of this database's tailers: they must reconnect and catch up. */
  async function cutListeners() {
    const admin = new pg.Client({ connectionString: nodes[0]?.db.pool?.options.connectionString });
    await admin.connect();
    try {
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid() AND (query ILIKE 'LISTEN%' OR query = 'SELECT 1')`,
        [dbName],
      );
    } finally {
      await admin.end();
    }
  }

  async function runWriter(store: ObjectStore, ops: Op[], tag: string): Promise<number> {
    const mine: { id: string; etag: string }[] = [];
    let written = 0;
    for (const [i, op] of ops.entries()) {
      try {
        if (op.kind === 'create' || mine.length === 0) {
          const { obj } = await store.create(Group, { Name: `${tag}-${i}` });
          mine.push({ id: obj.id, etag: obj.etag });
        } else if (op.kind === 'update') {
          const target = mine[op.pick % mine.length] as { id: string; etag: string };
          const { obj } = await store.update(Group, target.id, { Name: `${tag}-${i}-u` }, target.etag);
          target.etag = obj.etag;
        } else {
          const at = op.pick % mine.length;
          const target = mine[at] as { id: string; etag: string };
          await store.delete(Group, target.id, target.etag);
          mine.splice(at, 1);
        }
        written++;
      } catch (e) {
        // Writers touch only their own objects, so no write may fail.
        if (e instanceof ApiError) throw new Error(`${e.code}: ${e.message}`);
        throw e;
      }
    }
    return written;
  }

  const reached = (n: Node, until: LogPosition) => !isAfter(until, n.tailer.position);
  const key = (c: Change) => `${c.tx}:${c.seq}`;

  async function allCaughtUp(until: LogPosition, timeoutMs: number) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (nodes.every((n) => reached(n, until))) return;
      if (Date.now() > deadline) throw new Error(`tailers did not reach ${key(until as Change)}`);
      for (const n of nodes) n.tailer.wake();
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  let run = 0;
  it('every tailer delivers every committed change exactly once, all in one order', async () => {
    await fc.assert(
      fc.asyncProperty(
        // Per instance, two concurrent writers with their own sequence of steps.
        fc.array(fc.array(fc.array(opArb, { minLength: 1, maxLength: 12 }), { minLength: 2, maxLength: 2 }), {
          minLength: instancesOn(backend),
          maxLength: instancesOn(backend),
        }),
        fc.nat(30),
        async (plan, cutAfterMs) => {
          run++;
          // Every tailer delivered everything of the runs before (allCaughtUp): read on from there.
          const from = (nodes[0] as Node).tailer.position;
          const marks = nodes.map((n) => n.seen.length);
          const cut =
            backend === 'postgres'
              ? new Promise((r) => setTimeout(r, cutAfterMs)).then(cutListeners)
              : Promise.resolve();
          const counts = await Promise.all(
            plan.flatMap((writers, i) =>
              writers.map((ops, w) => runWriter((nodes[i] as Node).store, ops, `r${run}n${i}w${w}`)),
            ),
          );
          await cut;
          const written = counts.reduce((a, b) => a + b, 0);
          const committed = await readLog((nodes[0] as Node).store, from);
          // One change per successful write, none for anything else.
          expect(committed.length).toBe(written);
          await allCaughtUp(committed[committed.length - 1] as Change, 15_000);
          const expected = committed.map(key);
          for (const [i, n] of nodes.entries()) {
            const got = n.seen.slice(marks[i]).map(key);
            // Exactly the committed changes, each once, in the log's order (the one order).
            expect(got).toEqual(expected);
          }
        },
      ),
      { numRuns: 12 },
    );
  }, 240_000);

  // Only PostgreSQL writes in parallel; SQLite's one writer has nothing to show here.
  if (backend === 'postgres')
    it('holds no lock over a whole write: a write of another object commits while one is open, a write of the same object waits for it', async () => {
      const a = nodes[0] as Node;
      const b = nodes[1] as Node;
      const { obj: x } = await a.store.create(Group, { Name: 'lock-x' });
      const { obj: y } = await a.store.create(Group, { Name: 'lock-y' });
      let release: () => void = () => {};
      const gate = new Promise<void>((r) => {
        release = r;
      });
      let entered: () => void = () => {};
      const inside = new Promise<void>((r) => {
        entered = r;
      });
      // A write of x that stays open (its transaction holds x's row) until released.
      const slow = a.store.systemPut(Group, x.id, async (doc) => {
        entered();
        await gate;
        return { doc: { ...(doc ?? {}), Name: 'x-slow' } };
      });
      await inside;
      // Another instance writes y meanwhile: it must not wait for the open transaction.
      const t0 = Date.now();
      await b.store.update(Group, y.id, { Name: 'y2' }, '*');
      expect(Date.now() - t0).toBeLessThan(2000);
      // A conditional write of x with the ETag read before waits for the open one, then fails 412.
      const same = b.store.update(Group, x.id, { Name: 'x-other' }, x.etag).then(
        () => 'written',
        (e: unknown) => (e instanceof ApiError ? e.status : e),
      );
      await new Promise((r) => setTimeout(r, 200));
      release();
      await slow;
      expect(await same).toBe(412);
      expect((await a.store.get(Group, x.id))?.doc.Name).toBe('x-slow');
    }, 30_000);
  // The case the log's order exists for: a change whose sequence number was drawn first commits
  // last. A reader going by sequence numbers alone would move past it and never deliver it.
  if (backend === 'postgres')
    it('delivers a change that committed after a later-numbered one, before it, on every instance', async () => {
      // Start from a quiet log that every tailer has delivered.
      const earlier = await readLog((nodes[0] as Node).store);
      if (earlier.length > 0) await allCaughtUp(earlier[earlier.length - 1] as Change, 5_000);
      const starts = nodes.map((n) => n.seen.length);
      const held = new pg.Client({ connectionString: nodes[0]?.db.pool?.options.connectionString });
      await held.connect();
      try {
        await held.query('BEGIN');
        const drawn = await held.query<{ seq: string }>(
          `INSERT INTO changes (type, id, data, etag, time) VALUES ('Group', 'held-open', '{}', '"h"', $1) RETURNING seq`,
          [Date.now()],
        );
        const { obj } = await (nodes[1] as Node).store.create(Group, { Name: 'committed-first' });
        await new Promise((r) => setTimeout(r, 300));
        for (const n of nodes) n.tailer.wake();
        await new Promise((r) => setTimeout(r, 100));
        // Committed, and numbered after the open one: not delivered while that one may still come.
        for (const [i, n] of nodes.entries())
          expect(n.seen.slice(starts[i]).map((c) => c.id)).not.toContain(obj.id);
        await held.query('COMMIT');
        const committed = await readLog(
          (nodes[0] as Node).store,
          (nodes[0] as Node).seen[(starts[0] as number) - 1] ?? LOG_START,
        );
        const ids = committed.map((c) => c.id);
        expect(ids.slice(-2)).toEqual(['held-open', obj.id]);
        expect(Number(drawn.rows[0]?.seq)).toBeLessThan((committed[committed.length - 1] as Change).seq);
        // No notification announces the raw insert: the tailers find it by reading again while
        // changes wait behind a running transaction.
        await allCaughtUp(committed[committed.length - 1] as Change, 5_000);
        for (const [i, n] of nodes.entries())
          expect(n.seen.slice(starts[i]).map((c) => c.id)).toEqual(['held-open', obj.id]);
      } finally {
        await held.query('ROLLBACK').catch(() => {});
        await held.end();
      }
    }, 30_000);
  // A transaction gets its id early (at a row lock), waits for the object's row lock, and writes
  // the object after the lock's holder committed: the newer version comes first in the log.
  if (backend === 'postgres')
    it('never ends an object on an older version when a newer one comes first in the log', async () => {
      const earlier = await readLog((nodes[0] as Node).store);
      if (earlier.length > 0) await allCaughtUp(earlier[earlier.length - 1] as Change, 5_000);
      const starts = nodes.map((n) => n.seen.length);
      const { obj } = await (nodes[0] as Node).store.create(Group, { Name: 'v1' });
      const early = new pg.Client({ connectionString: nodes[0]?.db.pool?.options.connectionString });
      await early.connect();
      try {
        await early.query('BEGIN');
        const tx = (await early.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x')).rows[0]?.x;
        // Another instance writes version 2 and commits, with a newer transaction id.
        await (nodes[1] as Node).store.update(Group, obj.id, { Name: 'v2' }, '*');
        // The early transaction writes version 3 (as after waiting for the row), then commits.
        await early.query(
          `INSERT INTO changes (type, id, data, etag, time) VALUES ('Group', $1, '{"Name":"v3"}', '"v3"', $2)`,
          [obj.id, Date.now()],
        );
        await early.query('COMMIT');
        const log = (
          await readLog((nodes[0] as Node).store, earlier[earlier.length - 1] ?? LOG_START)
        ).filter((c) => c.id === obj.id);
        // The log's order puts version 3 (older transaction id) before version 2.
        expect(log.map((c) => c.etag)).toEqual([obj.etag, '"v3"', expect.not.stringMatching(/v3/)]);
        expect(log[1]?.tx).toBe(tx);
        await allCaughtUp(log[log.length - 1] as Change, 5_000);
        for (const [i, n] of nodes.entries()) {
          const mine = n.seen.slice(starts[i]).filter((c) => c.id === obj.id);
          // Version 1, then version 3; version 2, older than what was delivered, is left out.
          expect(mine.map((c) => c.etag)).toEqual([obj.etag, '"v3"']);
        }
      } finally {
        await early.query('ROLLBACK').catch(() => {});
        await early.end();
      }
    }, 30_000);
  if (backend === 'postgres')
    it('names the transaction changes wait for when they wait long, without its statement', async () => {
      const lines: {
        msg?: string;
        transaction?: { pid: number; openSeconds: number; application: string };
      }[] = [];
      const logger = pino({ level: 'warn' }, { write: (l: string) => lines.push(JSON.parse(l)) });
      const n0 = nodes[0] as Node;
      const watcher = new ChangeTailer(
        n0.store,
        () => {},
        () => false,
        logger,
        {
          pollIntervalMs: 500,
          batchSize: 100,
          horizonWarnMs: 300,
        },
      );
      await watcher.start();
      const open = new pg.Client({
        connectionString: n0.db.pool?.options.connectionString,
        application_name: 'left-open',
      });
      await open.connect();
      try {
        await open.query('BEGIN');
        const pid = (await open.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
        // A statement with a literal that must not reach the log.
        await open.query(`SELECT pg_current_xact_id(), 'secret-literal-${process.pid}'`);
        await (nodes[1] as Node).store.create(Group, { Name: 'waits' });
        const deadline = Date.now() + 5_000;
        while (!lines.some((l) => l.transaction?.pid === pid) && Date.now() < deadline) {
          watcher.wake();
          await new Promise((r) => setTimeout(r, 50));
        }
        const warned = lines.find((l) => l.transaction?.pid === pid);
        expect(warned?.msg).toBe(
          'event stream: changes wait for a transaction still open on the PostgreSQL server',
        );
        expect(warned?.transaction?.application).toBe('left-open');
        expect(JSON.stringify(lines)).not.toContain('secret-literal');
        // Once: waiting on, the same transaction is not logged again.
        await new Promise((r) => setTimeout(r, 800));
        watcher.wake();
        await new Promise((r) => setTimeout(r, 100));
        expect(lines.filter((l) => l.transaction?.pid === pid)).toHaveLength(1);
      } finally {
        await open.query('ROLLBACK').catch(() => {});
        await open.end();
        await watcher.close();
      }
    }, 30_000);
});
