import SQLite from 'better-sqlite3';
import fc from 'fast-check';
import { type Kysely, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { Group } from '../../src/objects/group.js';
import type { Database, Db } from '../../src/store/db.js';
import { staleSnapshot } from '../../src/store/otherwriters.js';
import { AppendOnlyTable, WriteBatches } from '../../src/store/writebatch.js';
import { freshStore, readLog } from '../helpers.js';

/*
 * SQLite's group commit (src/store/writebatch.ts): the writes of one turn of the event loop share
 * a transaction, each in a savepoint. What must hold whatever the batching: a write is answered
 * only once it is committed, a failed write leaves nothing and takes nothing else with it, and when
 * the batch cannot commit, every write in it is told so.
 */

/** The Db with its Kysely wrapped to count the transactions begun on it. */
function counting(db: Db) {
  const counter = { began: 0 };
  const kysely = new Proxy(db.kysely, {
    get(target, prop) {
      if (prop === 'startTransaction') {
        return () => {
          counter.began++;
          return target.startTransaction();
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  }) as Kysely<Database>;
  return { db: { ...db, kysely }, counter };
}

describe('SQLite writes of one turn share a transaction', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let batches: WriteBatches;
  let counter: { began: number };
  /** The number of rows of each INSERT into the test's log table, in order. */
  let logInserts: number[];

  beforeEach(async () => {
    ({ db, cleanup } = await freshStore('sqlite'));
    await sql`CREATE TABLE t (k TEXT PRIMARY KEY)`.execute(db.kysely);
    await sql`CREATE TABLE parent (id TEXT PRIMARY KEY)`.execute(db.kysely);
    await sql`CREATE TABLE child (p TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`.execute(
      db.kysely,
    );
    const wrapped = counting(db);
    counter = wrapped.counter;
    const writeSync = db.writeSync;
    if (!writeSync) throw new Error('a SQLite Db has writeSync');
    logInserts = [];
    batches = new WriteBatches({
      ...wrapped.db,
      writeSync: (text, params) => {
        if (text.startsWith('INSERT INTO log ')) logInserts.push(params.length);
        return writeSync(text, params);
      },
    });
  });
  afterEach(async () => {
    await cleanup();
  });

  /** What another connection sees: only committed rows. */
  const committed = (table: 't' | 'child' = 't') => {
    if (!db.readSync) throw new Error('a SQLite file has a reader');
    const column = table === 't' ? 'k' : 'p';
    return db.readSync<{ k: string }>(`SELECT ${column} AS k FROM ${table} ORDER BY k`, []).map((r) => r.k);
  };
  const put = (k: string) => (tx: Kysely<Database>) => sql`INSERT INTO t (k) VALUES (${k})`.execute(tx);

  it('begins one transaction for the writes of a turn, and another for a later turn', async () => {
    const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
    await Promise.all(keys.map((k) => batches.run(put(k))));
    expect(counter.began).toBe(1);
    expect(committed()).toEqual(keys);
    await batches.run(put('later'));
    await batches.run(put('later still'));
    expect(counter.began).toBe(3);
  });

  it('answers no write before the COMMIT that holds it', async () => {
    let firstAnswered = false;
    let seenByOthers: string[] | undefined;
    const first = batches.run(put('a')).then(() => {
      firstAnswered = true;
      // Answered: so committed, together with the write after it in the same batch.
      expect(committed()).toEqual(['a', 'b']);
    });
    const second = batches.run(async (tx) => {
      await put('b')(tx);
      // 'a' ran before this write, in this transaction: not committed yet, so not answered yet.
      seenByOthers = committed();
      expect(firstAnswered).toBe(false);
    });
    await Promise.all([first, second]);
    expect(seenByOthers).toEqual([]);
    expect(firstAnswered).toBe(true);
  });

  it('undoes a failed write alone: the writes around it commit', async () => {
    const results = await Promise.allSettled([
      batches.run(put('x')),
      batches.run(async (tx) => {
        await put('y')(tx);
        await put('y2')(tx);
        throw new Error('refused after writing');
      }),
      batches.run(put('z')),
      // A statement that fails by itself (a duplicate key) is one more failed write.
      batches.run(put('x')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toContain('refused after writing');
    expect(counter.began).toBe(1);
    expect(committed()).toEqual(['x', 'z']);
  });

  it('fails every write of a batch whose COMMIT fails, and the next batch starts clean', async () => {
    // The orphan row breaks a deferred foreign key: SQLite refuses it at COMMIT, not before.
    const results = await Promise.allSettled([
      batches.run(put('p')),
      batches.run((tx) => sql`INSERT INTO child (p) VALUES ('nobody')`.execute(tx)),
      batches.run(put('q')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const r of results) expect(String((r as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY/);
    expect(committed()).toEqual([]);
    expect(committed('child')).toEqual([]);
    await batches.run(put('after'));
    expect(committed()).toEqual(['after']);
  });

  it('fails the writes before a transaction SQLite ended; those after it start a new one', async () => {
    const results = await Promise.allSettled([
      batches.run(put('before')),
      batches.run(async (tx) => {
        // What SQLite does on a full disk or an I/O error: the whole transaction is rolled back.
        await sql`ROLLBACK`.execute(tx);
        throw new Error('the disk is full');
      }),
      batches.run(put('after')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toContain('the disk is full');
    expect(committed()).toEqual(['after']);
    expect(counter.began).toBe(2);
  });

  it('fails the writes of a transaction gone under a write that did not say so', async () => {
    const results = await Promise.allSettled([
      batches.run(put('before')),
      batches.run(async (tx) => {
        // A function that caught SQLite's error and went on: its savepoint went with the transaction.
        await sql`ROLLBACK`.execute(tx);
      }),
      batches.run(put('after')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
    expect(committed()).toEqual(['after']);
  });

  it('ends a batch whose snapshot another process made stale: the writes before stand, those after start afresh', async () => {
    await batches.run(put('old'));
    // Another process on the same file (the CLI), which waits for no lock at all.
    const other = new SQLite(db.describe.replace(/^sqlite /, ''));
    other.pragma('busy_timeout = 0');
    try {
      const results = await Promise.allSettled([
        // Reads only: it takes no lock, so the other process can commit after it.
        batches.run((tx) => sql`SELECT count(*) AS n FROM t`.execute(tx)),
        batches.run(async (tx) => {
          other.exec(`INSERT INTO t (k) VALUES ('other')`);
          await put('stale')(tx);
        }),
        batches.run(put('after')),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(staleSnapshot((results[1] as PromiseRejectedResult).reason)).toBe(true);
      expect(counter.began).toBe(3);
      expect(committed()).toEqual(['after', 'old', 'other']);
    } finally {
      other.close();
    }
  });

  it('lets reads outside the batch go on at once, seeing only what is committed', async () => {
    await batches.run(put('old'));
    let read: { rows: { k: string }[] } | undefined;
    await batches.run(async (tx) => {
      await put('new')(tx);
      // A statement of fixed shape outside any transaction (sessions, sign-in counters) reads on
      // the reader: it neither waits for the batch nor sees its writes, not yet answered.
      read = db.runSync?.<{ k: string }>('SELECT k FROM t ORDER BY k', []);
    });
    expect(read?.rows).toEqual([{ k: 'old' }]);
  });

  describe('rows appended to a log table', () => {
    const log = new AppendOnlyTable('log', ['v']);
    beforeEach(async () => {
      await sql`CREATE TABLE log (seq INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT CHECK (v <> 'poison'))`.execute(
        db.kysely,
      );
    });
    const logged = () => db.readSync?.<{ v: string }>('SELECT v FROM log ORDER BY seq', []).map((r) => r.v);
    /** A write of `k` that appends `v` to the log; `fail` refuses it after its statement. */
    const putLogged = (k: string, v = k, fail = false) =>
      batches.run(
        async (tx) => {
          await put(k)(tx);
          // The rows of the writes before this one, kept by the batch, are not in the table yet:
          // inside the batch it holds what is committed, no more.
          const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM log`.execute(tx);
          if (Number(rows[0]?.n) !== logged()?.length)
            throw new Error('a log row went in before the batch ended');
          if (fail) throw new Error('refused after writing');
        },
        () => [{ into: log, values: [v] }],
      );

    it('go in at the batch end, in the order the writes ended; an undone write leaves none', async () => {
      const results = await Promise.allSettled([
        putLogged('a'),
        putLogged('b'),
        putLogged('c', 'c', true),
        putLogged('d'),
        // A statement that fails by itself (a duplicate key): no row either.
        putLogged('a', 'a again'),
        putLogged('e'),
      ]);
      expect(results.map((r) => r.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
        'rejected',
        'fulfilled',
      ]);
      expect(counter.began).toBe(1);
      expect(committed()).toEqual(['a', 'b', 'd', 'e']);
      expect(logged()).toEqual(['a', 'b', 'd', 'e']);
    });

    it('fail every write of the batch when they cannot go in, and the next batch starts clean', async () => {
      const results = await Promise.allSettled([putLogged('a'), putLogged('b', 'poison'), putLogged('c')]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
      for (const r of results) expect(String((r as PromiseRejectedResult).reason)).toMatch(/CHECK/);
      expect(committed()).toEqual([]);
      expect(logged()).toEqual([]);
      await putLogged('after');
      expect(committed()).toEqual(['after']);
      expect(logged()).toEqual(['after']);
    });

    it('go in whole and in order when a batch holds more than one statement takes', async () => {
      const keys = Array.from({ length: 250 }, (_, i) => `k${String(i).padStart(3, '0')}`);
      await Promise.all(keys.map((k) => putLogged(k)));
      expect(counter.began).toBe(1);
      expect(logged()).toEqual(keys);
      // Past 32 rows, powers of two, largest first: few statement texts, whatever the batch sizes.
      expect(logInserts).toEqual([64, 64, 64, 32, 26]);
    });

    it('take one statement for a batch of up to 32 rows, and powers of two beyond', async () => {
      const write = (n: number, from: number) =>
        Promise.all(Array.from({ length: n }, (_, i) => putLogged(`k${from + i}`)));
      await write(13, 0);
      expect(logInserts).toEqual([13]);
      await write(32, 100);
      expect(logInserts).toEqual([13, 32]);
      await write(45, 200);
      expect(logInserts).toEqual([13, 32, 32, 13]);
      expect(logged()).toHaveLength(90);
    });
  });

  it('takes writes in the order they came, each seeing those before it', async () => {
    const seen: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        batches.run(async (tx) => {
          const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM t`.execute(tx);
          seen.push(Number(rows[0]?.n));
          await put(`n${String(i).padStart(2, '0')}`)(tx);
        }),
      ),
    );
    expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});

/*
 * The store on top of the batches, against a serial model: rounds of creates, updates and deletes
 * of Groups (unique Name, compared without case) issued all at once, so they share batches, with
 * names and ETags chosen to collide. Every write's outcome, the objects after each round and the
 * change log must be what running the same writes one by one, in the order issued, gives.
 */
type Op =
  | { op: 'create'; name: string }
  | { op: 'update'; slot: number; name: string; fresh: boolean }
  | { op: 'delete'; slot: number; fresh: boolean };

const NAMES = ['a', 'B', 'b', 'c'];
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('create' as const), name: fc.constantFrom(...NAMES) }),
  fc.record({
    op: fc.constant('update' as const),
    slot: fc.nat(5),
    name: fc.constantFrom(...NAMES),
    fresh: fc.boolean(),
  }),
  fc.record({ op: fc.constant('delete' as const), slot: fc.nat(5), fresh: fc.boolean() }),
);

interface Slot {
  id: string;
  name: string | undefined;
}

describe('the store on SQLite, writes issued together, against a serial model', () => {
  it('gives every write the outcome, and the log the changes, of one-by-one writes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(opArb, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 4 }),
        async (rounds) => {
          const { store, cleanup } = await freshStore('sqlite');
          try {
            const slots: Slot[] = [];
            let logged = (await readLog(store)).length;
            for (const round of rounds) {
              const etags = await Promise.all(slots.map(async (s) => (await store.get(Group, s.id))?.etag));
              const changedThisRound = new Set<number>();
              const expected: (number | string)[] = [];
              const changedIds: string[] = [];
              // The objects the writes that succeed change, in the order issued: the log's order.
              const loggedOrder: (() => string)[] = [];
              const taken = (name: string, except?: number) =>
                slots.some((s, i) => i !== except && s.name?.toLowerCase() === name.toLowerCase());
              const calls = round.map((o) => {
                if (o.op === 'create') {
                  const p = store.create(Group, { Name: o.name });
                  if (taken(o.name)) expected.push(409);
                  else {
                    expected.push(201);
                    const slot = slots.length;
                    slots.push({ id: '', name: o.name });
                    changedThisRound.add(slot);
                    loggedOrder.push(() => (slots[slot] as Slot).id);
                    return p.then((r) => {
                      (slots[slot] as Slot).id = r.obj.id;
                      return 201;
                    });
                  }
                  return p.then(() => 201);
                }
                // Objects created this round have no ID yet when these writes are issued.
                const slot = slots[o.slot]?.id ? slots[o.slot] : undefined;
                const etag = (o.fresh && etags[o.slot]) || '"stale"';
                const id = slot?.id ?? `gnone${o.slot}`;
                const stale = !o.fresh || changedThisRound.has(o.slot);
                if (!slot || slot.name === undefined) expected.push(404);
                else if (stale) expected.push(412);
                else if (o.op === 'delete') {
                  expected.push(204);
                  slot.name = undefined;
                  changedThisRound.add(o.slot);
                  changedIds.push(slot.id);
                  loggedOrder.push(() => slot.id);
                } else if (taken(o.name, o.slot)) expected.push(409);
                else if (slot.name === o.name) expected.push('unchanged');
                else {
                  expected.push(200);
                  slot.name = o.name;
                  changedThisRound.add(o.slot);
                  changedIds.push(slot.id);
                  loggedOrder.push(() => slot.id);
                }
                if (o.op === 'delete') return store.delete(Group, id, etag).then(() => 204);
                return store
                  .update(Group, id, { Name: o.name }, etag)
                  .then((r) => (r.changed ? 200 : 'unchanged'));
              });
              const outcomes = (await Promise.allSettled(calls)).map((r) =>
                r.status === 'fulfilled'
                  ? r.value
                  : r.reason instanceof ApiError
                    ? r.reason.status
                    : String(r.reason),
              );
              expect(outcomes).toEqual(expected);
              for (const s of slots) expect((await store.get(Group, s.id))?.doc.Name).toBe(s.name);
              const log = await readLog(store);
              const created = outcomes.filter((o) => o === 201).length;
              expect(log.length - logged).toBe(created + changedIds.length);
              expect(log.slice(logged).map((c) => c.id)).toEqual(loggedOrder.map((id) => id()));
              logged = log.length;
            }
          } finally {
            await cleanup();
          }
        },
      ),
      { numRuns: 30 },
    );
  }, 120_000);
});

describe('closing a store on SQLite', () => {
  it('waits until its last writes have committed', async () => {
    const { db, store, cleanup } = await freshStore('sqlite');
    try {
      const created = store.create(Group, { Name: 'the last write' });
      await store.settled();
      // What the service waits for before it closes the database (src/service/start.ts): by then
      // another connection sees the write.
      const groups = db.readSync?.<{ n: number }>(
        `SELECT count(*) AS n FROM objects WHERE type = 'Group'`,
        [],
      );
      expect(groups).toEqual([{ n: 1 }]);
      await created;
    } finally {
      await cleanup();
    }
  });
});
