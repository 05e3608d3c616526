import fc from 'fast-check';
import { CompiledQuery, createQueryId, type KyselyPlugin, type RootOperationNode } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Group } from '../../src/objects/group.js';
import { User } from '../../src/objects/user.js';
import type { ObjectType } from '../../src/schema/type.js';
import type { Db } from '../../src/store/db.js';
import { parseListQuery, type RawListQuery } from '../../src/store/listquery.js';
import { listObjects } from '../../src/store/listread.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { backends, freshStore, jsonLines } from '../helpers.js';

type Line = { ID: string; Item: Record<string, unknown> };

const readAll = async (store: ObjectStore, type: ObjectType, raw: RawListQuery) => {
  const page = await store.list(type, parseListQuery(type, raw));
  let text = '';
  for await (const chunk of page.chunks) text += chunk;
  return { lines: jsonLines(text) as Line[], start: page.startCursor, end: page.endCursor };
};

describe.each(backends())('lists ordered by a unique field on %s', (backend) => {
  let db: Db;
  let store: ObjectStore;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, store, cleanup } = await freshStore(backend));
    // Most users have no e-mail address: the first key repeats, and only the id orders them.
    for (let i = 0; i < 60; i++)
      await store.create(
        User,
        i % 3 === 0 ? { Email: `u${(i * 7) % 60}@example.com`, UserName: `n${i}` } : {},
      );
    for (let i = 0; i < 12; i++)
      await store.create(Group, { Name: `g${(i * 5) % 12}`, Description: i % 2 ? 'odd' : '' });
  }, 60_000);
  afterAll(async () => cleanup?.());

  /** The SQL of a list's first page, as listObjects sends it. */
  const statementOf = async (type: ObjectType, raw: RawListQuery) => {
    const nodes: RootOperationNode[] = [];
    const recorder: KyselyPlugin = {
      transformQuery: ({ node }) => {
        nodes.push(node);
        return node;
      },
      transformResult: async ({ result }) => result,
    };
    const page = await listObjects(
      { dialect: db.dialect, kysely: db.kysely.withPlugin(recorder) } as Db,
      type,
      parseListQuery(type, raw),
    );
    for await (const _ of page.chunks) {
      // read to the end: the page's statements are all sent
    }
    const node = nodes[0];
    if (!node) throw new Error('the list sent no statement');
    return db.kysely.getExecutor().compileQuery(node, createQueryId());
  };

  /** The plan the database makes for it: whether a sort step is left, and which index it reads. */
  const planOf = async (q: CompiledQuery): Promise<string> => {
    if (db.dialect === 'sqlite') {
      const r = await db.kysely.executeQuery<{ detail: string }>(
        CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]),
      );
      return r.rows.map((x) => x.detail).join('\n');
    }
    // A few dozen rows: a sequential scan and a sort cost less than any index, so both are priced
    // out; the plan then shows whether an index can give the order at all.
    return db.kysely.transaction().execute(async (trx) => {
      await trx.executeQuery(CompiledQuery.raw('SET LOCAL enable_sort = off'));
      await trx.executeQuery(CompiledQuery.raw('SET LOCAL enable_seqscan = off'));
      const r = await trx.executeQuery<{ 'QUERY PLAN': string }>(
        CompiledQuery.raw(`EXPLAIN ${q.sql}`, [...q.parameters]),
      );
      return r.rows.map((x) => x['QUERY PLAN']).join('\n');
    });
  };

  // Ascending, the index gives the whole order. Descending, the id that ends every order still
  // runs ascending, so the database reads the index backwards and sorts only rows with the same
  // value (SQLite: "RIGHT PART OF ORDER BY"; PostgreSQL: an incremental sort with a presorted key).
  const fullSort = /USE TEMP B-TREE FOR ORDER BY|(^|->)\s*Sort\s+\(cost/m;
  const types: Record<string, ObjectType> = { User, Group };

  it.each([
    ['User', 'Email', 'objects_user_email', 'Active = true'],
    ['User', 'UserName', 'objects_user_username', 'Active = true'],
    ['Group', 'Name', 'objects_group_name', 'RequiresApproval = false'],
  ])(
    '%s ordered by %s reads %s and does not sort the whole list: both directions, from a cursor, up to one',
    async (kind, field, index, filter) => {
      const type = types[kind] as ObjectType;
      const first = await readAll(store, type, { order: field, limit: '5' });
      for (const raw of [
        { order: field, limit: '50' },
        { order: `-${field}`, limit: '50' },
        { order: field, limit: '5', start: first.end },
        { order: field, limit: '5', end: first.end },
        { order: [field, '-ID'] },
        { order: field, filter },
      ]) {
        const plan = await planOf(await statementOf(type, raw));
        const what = JSON.stringify(raw);
        expect(plan, what).toContain(index);
        if (!(raw.start || raw.end)) expect(plan, what).not.toMatch(fullSort);
        // From a cursor (here inside the run of users without an e-mail address), it seeks to the
        // exact position, the (value, id) pair, rather than read the rows before it.
        else if (backend === 'postgres') {
          expect(plan, what).not.toMatch(fullSort);
          expect(plan, what).toMatch(/Index Cond: .*ROW\(.*\) [<>]=? ROW\(/);
        } else {
          // SQLite: one seek per range of the position (listread.ts, positionRanges), the one
          // inside the run by both keys. Each range reads at most a page, and only those rows are
          // sorted, to merge the ranges: never the list.
          expect(plan, what).toMatch(/\(<expr>=\? AND id[<>]\?\)/);
          expect(plan, what).toMatch(/\(<expr>[<>]\?\)/);
          expect(plan, what).not.toMatch(/SCAN objects/);
          const lines = plan.split('\n');
          lines.forEach((line, i) => {
            if (/USE TEMP B-TREE/.test(line)) expect(lines[i - 1], what).toMatch(/^SCAN \(subquery-\d+\)$/);
          });
        }
      }
    },
  );

  it('a filter on a unique field finds its objects by the index, in the default order by ID', async () => {
    for (const [type, filter, index] of [
      [User, 'Email = "u21@example.com"', 'objects_user_email'],
      [Group, 'Name = "g3"', 'objects_group_name'],
    ] as const) {
      const plan = await planOf(await statementOf(type, { filter }));
      expect(plan, filter).toContain(index);
      expect(plan, filter).toMatch(/\(<expr>=\?\)|Index Cond: .*= /);
      expect(plan, filter).not.toMatch(fullSort);
      expect((await readAll(store, type, { filter })).lines).toHaveLength(1);
    }
  });

  it('a field without an index is still ordered (by a sort), so the index is what the plans above show', async () => {
    const plan = await planOf(await statementOf(Group, { order: 'Description', limit: '5' }));
    expect(plan).toMatch(fullSort);
  });

  it('pages with cursors, forwards and backwards, give the one order the whole list has, for any order and page size', async () => {
    const fields = ['Email', 'UserName', 'Active', 'Name.FullName'];
    await fc.assert(
      fc.asyncProperty(
        fc.shuffledSubarray(fields, { minLength: 1, maxLength: 2 }),
        fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }),
        fc.integer({ min: 1, max: 25 }),
        async (keys, desc, size) => {
          await pagesGiveTheWholeOrder(
            keys.map((k, i) => (desc[i] ? `-${k}` : k)),
            size,
          );
        },
      ),
      { numRuns: 15 },
    );
  }, 120_000);

  it('pages with cursors give the whole order also when the id runs against the first key, or a second key follows it', async () => {
    // The orders SQLite reads from a cursor as ranges of an index (listread.ts, positionRanges).
    for (const order of [
      ['Email', '-ID'],
      ['-Email'],
      ['Email', 'UserName'],
      ['-UserName', 'Email'],
      ['Name.FullName', '-Email'],
    ])
      for (const size of [1, 7]) await pagesGiveTheWholeOrder(order, size);
  }, 120_000);

  /** Pages of `size`, forwards from each end cursor and backwards from each start cursor, list the same IDs as the whole list. */
  const pagesGiveTheWholeOrder = async (order: string[], size: number) => {
    const whole = (await readAll(store, User, { order })).lines.map((l) => l.ID);
    expect(new Set(whole).size).toBe(whole.length);
    // Forwards from the start, each page from the last one's end cursor.
    const forwards: string[] = [];
    let start = '';
    let last = '';
    for (let i = 0; i < 100; i++) {
      const p = await readAll(store, User, { order, limit: String(size), start });
      forwards.push(...p.lines.map((l) => l.ID));
      last = p.end ?? '';
      if (p.lines.length < size) break;
      start = last;
    }
    expect(forwards, order.join()).toEqual(whole);
    // Backwards from right after the last record, each page ending where the one after it starts.
    const backwards: string[] = [];
    let end = last;
    for (let i = 0; i < 100; i++) {
      const p = await readAll(store, User, { order, limit: String(size), end });
      backwards.unshift(...p.lines.map((l) => l.ID));
      if (p.lines.length < size) break;
      end = p.start ?? '';
    }
    expect(backwards, order.join()).toEqual(whole);
  };
});

describe.each(backends())('a long run of equal values, in chunks and from cursors, on %s', (backend) => {
  let store: ObjectStore;
  let cleanup: () => Promise<void>;
  /** The users in the order `order=Email` must give: Email ("" when none), then ID, byte by byte. */
  let model: { id: string; email: string }[];

  beforeAll(async () => {
    ({ store, cleanup } = await freshStore(backend));
    // More than two chunks (1,000 rows each) of users without an e-mail address.
    const docs = Array.from({ length: 2500 }, (_, i) =>
      i % 10 === 0 ? { Email: `u${i % 7}x${i}@example.com` } : {},
    );
    const made = await store.systemInsertMany(User, docs);
    const byte = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    model = made
      .map((o) => ({ id: o.id, email: (JSON.parse(o.data) as { Email?: string }).Email ?? '' }))
      .sort((a, b) => byte(a.email, b.email) || byte(a.id, b.id));
  }, 120_000);
  afterAll(async () => cleanup?.());

  const ids = (lines: Line[]) => lines.map((l) => l.ID);
  /** The cursor right after the model's record at `i`, as the API hands it out. */
  const cursorAfter = (i: number) => {
    const r = model[i];
    if (!r) throw new Error(`no record ${i}`);
    return Buffer.from(JSON.stringify(['Email,ID', true, [r.email, r.id]])).toString('base64url');
  };

  it('reads the whole list in the one order, forwards and backwards, chunk after chunk', async () => {
    expect(ids((await readAll(store, User, { order: 'Email' })).lines)).toEqual(model.map((r) => r.id));
    const reversed = [...model].sort((a, b) =>
      a.email === b.email ? (a.id < b.id ? -1 : 1) : a.email < b.email ? 1 : -1,
    );
    expect(ids((await readAll(store, User, { order: '-Email' })).lines)).toEqual(reversed.map((r) => r.id));
  });

  it('gives pages from a cursor inside the run, with an offset, and between two cursors, as the model does', async () => {
    for (const at of [0, 999, 1000, 1500, 2200]) {
      const page = await readAll(store, User, {
        order: 'Email',
        start: cursorAfter(at),
        offset: '7',
        limit: '20',
      });
      expect(ids(page.lines), `after ${at}`).toEqual(model.slice(at + 8, at + 28).map((r) => r.id));
      const before = await readAll(store, User, { order: 'Email', end: cursorAfter(at), limit: '20' });
      expect(ids(before.lines), `up to ${at}`).toEqual(
        model.slice(Math.max(0, at - 19), at + 1).map((r) => r.id),
      );
      const between = await readAll(store, User, {
        order: 'Email',
        start: cursorAfter(at),
        end: cursorAfter(at + 40),
      });
      expect(ids(between.lines), `between ${at}`).toEqual(model.slice(at + 1, at + 41).map((r) => r.id));
    }
  });
});
