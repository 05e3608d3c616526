import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Group } from '../../src/objects/group.js';
import { User } from '../../src/objects/user.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { MAX_IDS_PER_READ, ReadBatches } from '../../src/store/readbatch.js';
import { backends, freshStore } from '../helpers.js';

/*
 * Reads by ID of one turn of the event loop are answered together (src/store/readbatch.ts): on
 * PostgreSQL in one statement, on SQLite with one question to the row cache and one statement.
 * What must hold: each read gets exactly its own object (never another's, whatever its ID holds),
 * a missing one is missing, a read sees every write answered before it was asked, and a failed
 * statement fails only the reads it carried.
 */

interface Row {
  id: string;
  v: string;
}

/** A ReadBatches over a table in memory, recording the statements it would send. */
function recorded(table: Map<string, Row>, fail?: (kind: string, ids: string[]) => boolean) {
  const calls: { kind: string; ids: string[] }[] = [];
  const batches = new ReadBatches<Row>(
    async (kind, id) => {
      calls.push({ kind, ids: [id] });
      if (fail?.(kind, [id])) throw new Error('lost');
      return table.get(`${kind} ${id}`);
    },
    async (kind, ids) => {
      calls.push({ kind, ids });
      if (fail?.(kind, ids)) throw new Error('lost');
      return ids.flatMap((id) => table.get(`${kind} ${id}`) ?? []);
    },
  );
  return { batches, calls };
}

const nextTurn = () => new Promise((r) => setImmediate(r));

describe('ReadBatches', () => {
  const table = new Map<string, Row>([
    ['User a', { id: 'a', v: 'user a' }],
    ['User b', { id: 'b', v: 'user b' }],
    ['Group a', { id: 'a', v: 'group a' }],
  ]);

  it('sends the reads of one turn as one statement per type, each ID once, and answers each its own row', async () => {
    const { batches, calls } = recorded(table);
    const got = await Promise.all([
      batches.get('User', 'a'),
      batches.get('User', 'b'),
      batches.get('User', 'a'),
      batches.get('Group', 'a'),
      batches.get('User', 'missing'),
    ]);
    expect(got.map((r) => r?.v)).toEqual(['user a', 'user b', 'user a', 'group a', undefined]);
    expect(calls).toEqual([
      { kind: 'User', ids: ['a', 'b', 'missing'] },
      { kind: 'Group', ids: ['a'] },
    ]);
  });

  it('reads of different turns go separately; a read alone is the one-row statement', async () => {
    const { batches, calls } = recorded(table);
    expect((await batches.get('User', 'a'))?.v).toBe('user a');
    expect((await batches.get('User', 'b'))?.v).toBe('user b');
    expect(calls).toEqual([
      { kind: 'User', ids: ['a'] },
      { kind: 'User', ids: ['b'] },
    ]);
  });

  it('a chain of reads, each asked when the last was answered, does not wait a turn of the event loop for each', async () => {
    const { batches, calls } = recorded(table);
    let turns = 0;
    let counting = true;
    const count = () =>
      setImmediate(() => {
        turns++;
        if (counting) count();
      });
    count();
    // As a request reading one object after another does, through layers of async functions.
    const through = async (id: string) => (await (async () => batches.get('User', id))())?.v;
    const seen: (string | undefined)[] = [];
    for (let i = 0; i < 12; i++) seen.push(await through(i % 2 ? 'a' : 'b'));
    counting = false;
    expect(seen).toEqual(Array.from({ length: 12 }, (_, i) => (i % 2 ? 'user a' : 'user b')));
    expect(calls).toHaveLength(12);
    // The first read waits for its turn's end; the others are sent as they are asked.
    expect(turns).toBeLessThanOrEqual(2);
  });

  it(`splits a gathering larger than ${MAX_IDS_PER_READ} IDs`, async () => {
    const { batches, calls } = recorded(table);
    const ids = Array.from({ length: MAX_IDS_PER_READ * 2 + 1 }, (_, i) => `n${i}`);
    const got = await Promise.all([...ids.map((id) => batches.get('User', id)), batches.get('User', 'a')]);
    expect(got.at(-1)?.v).toBe('user a');
    expect(got.slice(0, -1).every((r) => r === undefined)).toBe(true);
    expect(calls.map((c) => c.ids.length)).toEqual([MAX_IDS_PER_READ, MAX_IDS_PER_READ, 2]);
  });

  it('a statement that fails fails only the reads it carried, and the next turn reads again', async () => {
    let failing = true;
    const { batches } = recorded(table, (kind) => failing && kind === 'User');
    const [users, groups] = await Promise.all([
      Promise.allSettled([batches.get('User', 'a'), batches.get('User', 'b')]),
      Promise.allSettled([batches.get('Group', 'a')]),
    ]);
    expect(users.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(groups.map((r) => r.status)).toEqual(['fulfilled']);
    failing = false;
    await nextTurn();
    expect((await batches.get('User', 'a'))?.v).toBe('user a');
  });
});

describe.each(backends())('reads by ID gathered on %s', (backend) => {
  let store: ObjectStore;
  let cleanup: () => Promise<void>;
  let users: { id: string; etag: string }[];
  let group: { id: string };

  beforeAll(async () => {
    ({ store, cleanup } = await freshStore(backend));
    users = [];
    for (let i = 0; i < 40; i++) {
      const { obj } = await store.create(User, { Email: `reader${i}@example.com` });
      users.push(obj);
    }
    group = (await store.create(Group, { Name: 'readers' })).obj;
  });
  afterAll(async () => cleanup?.());

  /** IDs that an array literal or a comparison could misread, next to real ones. */
  const hostileIds = (real: string[]) => [
    `${real[0]}","${real[1]}`,
    `{${real[0]}}`,
    `${real[0]},${real[1]}`,
    'NULL',
    '',
    '\\',
    '"',
    `${real[0]} `,
    ` ${real[0]}`,
    real[0]?.toUpperCase() ?? '',
    `${real[0]}x`,
    'ünïcödé',
    // PostgreSQL's text cannot hold NUL: sent with the others, it would fail their statement.
    // SQLite compares text up to a NUL in some paths: such an ID must not find the object either.
    '\u0000',
    `${real[0]}\u0000`,
  ];

  it('each read gets its own object, or none, exactly as it would alone, whatever the IDs hold', async () => {
    const real = users.map((u) => u.id);
    const candidates = [...real, group.id, ...hostileIds(real)];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...candidates), { minLength: 1, maxLength: 60 }),
        fc.boolean(),
        async (ids, asGroups) => {
          const type = asGroups ? Group : User;
          const together = await Promise.all(ids.map((id) => store.get(type, id)));
          const alone: (string | undefined)[] = [];
          for (const id of ids) alone.push((await store.get(type, id))?.id);
          expect(together.map((o) => o?.id)).toEqual(alone);
          for (const [i, o] of together.entries()) if (o) expect(o.id).toBe(ids[i]);
          // Only the real objects of that type are found.
          const own = asGroups ? [group.id] : real;
          expect(together.map((o) => o?.id)).toEqual(ids.map((id) => (own.includes(id) ? id : undefined)));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a read sees every write answered before it was asked, while others read and write beside it', async () => {
    const [target] = users;
    if (!target) throw new Error('no user');
    let etag = target.etag;
    for (let round = 0; round < 30; round++) {
      const { obj } = await store.update(User, target.id, { Email: `round${round}@example.com` }, etag);
      etag = obj.etag;
      // Reads of other objects in the same turn, and another write under way.
      const beside = users.slice(1, 20).map((u) => store.get(User, u.id));
      const read = await store.get(User, target.id);
      await Promise.all(beside);
      expect(read?.etag).toBe(etag);
      expect(read?.data).toContain(`round${round}@example.com`);
    }
  });
});
