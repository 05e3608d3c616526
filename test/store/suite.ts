import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { APIKey, hashApiKey } from '../../src/objects/apikey.js';
import { Group } from '../../src/objects/group.js';
import { Metric } from '../../src/objects/metric.js';
import { User } from '../../src/objects/user.js';
import { parseListQuery } from '../../src/store/listquery.js';
import { isAfter, type LogPosition } from '../../src/store/logposition.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { readLog } from '../helpers.js';

/**
 * The contract every storage backend must meet (as Ory Kratos' identity/test/pool.go does for
 * its backends). Run it with a factory that yields a store on a fresh, migrated database.
 */
export function storeConformance(
  name: string,
  fresh: () => Promise<{ store: ObjectStore; cleanup: () => Promise<void> }>,
) {
  const withStore = (fn: (store: ObjectStore) => Promise<void>) => async () => {
    const { store, cleanup } = await fresh();
    try {
      await fn(store);
    } finally {
      await cleanup();
    }
  };
  const status = async (p: Promise<unknown>) => {
    try {
      await p;
      return 200;
    } catch (e) {
      if (e instanceof ApiError) return e.status;
      throw e;
    }
  };
  const readAll = (store: ObjectStore) => readLog(store);

  describe(`store conformance: ${name}`, () => {
    it(
      'creates, reads, updates and deletes, logging one change per write',
      withStore(async (store) => {
        const { obj } = await store.create(User, { Email: 'a@example.com' });
        expect(obj.doc.Email).toBe('a@example.com');
        const got = await store.get(User, obj.id);
        expect(got?.data).toBe(obj.data);
        expect(got?.etag).toBe(obj.etag);
        const up = await store.update(User, obj.id, { Email: 'b@example.com' }, obj.etag);
        expect(up.changed).toBe(true);
        expect(up.obj.etag).not.toBe(obj.etag);
        expect(up.obj.createTime).toBe(obj.createTime);
        await store.delete(User, obj.id, up.obj.etag);
        expect(await store.get(User, obj.id)).toBeUndefined();
        const changes = (await readAll(store)).filter((c) => c.id === obj.id);
        expect(changes.map((c) => (c.data === null ? 'delete' : JSON.parse(c.data).Email))).toEqual([
          'a@example.com',
          'b@example.com',
          'delete',
        ]);
        expect(changes.map((c) => c.etag).slice(0, 2)).toEqual([obj.etag, up.obj.etag]);
      }),
    );

    it(
      'orders 404 before 412 before unchanged, and logs nothing for those',
      withStore(async (store) => {
        const { obj } = await store.create(Group, { Name: 'g' });
        const seq = await store.lastSeq();
        expect(await status(store.update(Group, 'missing', {}, '"x"'))).toBe(404);
        expect(await status(store.update(Group, obj.id, { Name: 'h' }, '"stale"'))).toBe(412);
        expect(await status(store.delete(Group, obj.id, '"stale"'))).toBe(412);
        const same = await store.update(Group, obj.id, { Name: 'g' }, obj.etag);
        expect(same.changed).toBe(false);
        expect(same.obj.etag).toBe(obj.etag);
        expect(await store.lastSeq()).toBe(seq);
        expect((await store.get(Group, obj.id))?.doc.Name).toBe('g');
      }),
    );

    it(
      'writes nothing, not even a change, when a write fails half-way',
      withStore(async (store) => {
        await store.create(User, { Email: 'taken@example.com' });
        const seq = await store.lastSeq();
        expect(await status(store.create(User, { Email: 'TAKEN@example.com' }))).toBe(409);
        expect(await status(store.create(User, { Email: 42 }))).toBe(400);
        expect(await status(store.create(APIKey, { UserID: 'nobody' }))).toBe(400);
        expect(await store.lastSeq()).toBe(seq);
        const page = await store.list(User, parseListQuery(User, {}));
        let lines = 0;
        for await (const chunk of page.chunks) lines += chunk.split('\n').filter(Boolean).length;
        expect(lines).toBe(1);
      }),
    );

    it(
      'keeps unique fields unique, case-insensitively, and frees them on delete',
      withStore(async (store) => {
        const a = await store.create(User, { Email: 'x@example.com', UserName: 'xx' });
        const b = await store.create(User, { Email: 'y@example.com' });
        expect(await status(store.update(User, b.obj.id, { Email: 'X@EXAMPLE.COM' }, b.obj.etag))).toBe(409);
        expect(await status(store.create(User, { UserName: 'xx' }))).toBe(409);
        expect((await store.get(User, b.obj.id))?.doc.Email).toBe('y@example.com');
        await store.delete(User, a.obj.id, a.obj.etag);
        expect(await status(store.create(User, { Email: 'x@example.com', UserName: 'xx' }))).toBe(200);
      }),
    );

    it(
      'gives exactly one of two concurrent updates with the same If-Match',
      withStore(async (store) => {
        const { obj } = await store.create(Group, { Name: 'race' });
        for (let round = 0; round < 5; round++) {
          const current = (await store.get(Group, obj.id))!;
          const results = await Promise.all(
            [1, 2].map((n) =>
              status(store.update(Group, obj.id, { Name: `race-${round}-${n}` }, current.etag)),
            ),
          );
          expect(results.sort()).toEqual([200, 412]);
        }
      }),
    );

    it(
      'hands the change log to a reader in one order, so a tailer never skips a change',
      withStore(async (store) => {
        const seen: string[] = [];
        let last: LogPosition = await store.lastPosition();
        const start = last;
        let writing = true;
        const tail = (async () => {
          while (writing) {
            for (const c of (await store.changesAfter(last, 1000)).changes) {
              expect(isAfter(c, last)).toBe(true);
              last = { tx: c.tx, seq: c.seq };
              seen.push(`${c.tx}:${c.seq}`);
            }
            await new Promise((r) => setTimeout(r, 1));
          }
        })();
        await Promise.all(
          Array.from({ length: 8 }, async (_, w) => {
            for (let i = 0; i < 25; i++) await store.create(Group, { Name: `w${w}-${i}` });
          }),
        );
        writing = false;
        await tail;
        for (const c of await readLog(store, last)) seen.push(`${c.tx}:${c.seq}`);
        const all = (await readLog(store, start)).map((c) => `${c.tx}:${c.seq}`);
        expect(seen).toEqual(all);
        expect(all.length).toBe(200);
      }),
    );

    it(
      "never reads another transaction's uncommitted writes, and is not blocked by it",
      withStore(async (store) => {
        let release: () => void = () => {};
        const held = new Promise<void>((r) => {
          release = r;
        });
        let inserted: () => void = () => {};
        const wasInserted = new Promise<void>((r) => {
          inserted = r;
        });
        const tx = store.db.kysely
          .transaction()
          .execute(async (t) => {
            await t
              .insertInto('objects')
              .values({
                type: 'Group',
                id: 'dirty',
                data: '{"ID":"dirty"}',
                etag: '"x"',
                create_time: 0,
                modify_time: 0,
                secret: null,
              })
              .execute();
            inserted();
            await held;
            throw new Error('roll back');
          })
          .catch(() => undefined);
        await wasInserted;
        expect(await store.get(Group, 'dirty')).toBeUndefined();
        release();
        await tx;
        expect(await store.get(Group, 'dirty')).toBeUndefined();
      }),
    );

    it(
      'finds an object by a hidden lookup key',
      withStore(async (store) => {
        const { obj, response } = await store.create(APIKey, { Scopes: ['audit'] });
        const secret = String(response?.Secret);
        const found = await store.findByKey(APIKey, 'KeyHash', hashApiKey(secret));
        expect(found?.id).toBe(obj.id);
        expect(found?.secret.KeyHash).toBe(hashApiKey(secret));
        expect(obj.data).not.toContain(secret);
        expect(obj.data).not.toContain(hashApiKey(secret));
        expect(
          await store.findByKey(
            APIKey,
            'KeyHash',
            hashApiKey(`${secret.slice(0, -1)}${secret.endsWith('x') ? 'y' : 'x'}`),
          ),
        ).toBeUndefined();
      }),
    );

    it(
      'lets the service maintain read-only objects with systemPut',
      withStore(async (store) => {
        const m = await store.systemPut(Metric, 'users', () => ({ doc: { Name: 'users', Value: 3 } }));
        expect(m?.doc).toMatchObject({ ID: 'users', Name: 'users', Value: 3, Unit: '' });
        const same = await store.systemPut(Metric, 'users', (doc) => ({ doc: doc! }));
        expect(same?.etag).toBe(m?.etag);
        const up = await store.systemPut(Metric, 'users', (doc) => ({ doc: { ...doc!, Value: 4 } }));
        expect(up?.doc.Value).toBe(4);
        await store.systemPut(Metric, 'users', () => null);
        expect(await store.get(Metric, 'users')).toBeUndefined();
      }),
    );

    it(
      'streams lists longer than one database chunk, each object once',
      withStore(async (store) => {
        const n = 2003;
        for (let i = 0; i < n; i += 100) {
          await Promise.all(
            Array.from({ length: Math.min(100, n - i) }, (_, j) =>
              store.create(Group, { Name: `n${i + j}` }),
            ),
          );
        }
        const ids: string[] = [];
        const page = await store.list(Group, parseListQuery(Group, {}));
        for await (const chunk of page.chunks) {
          for (const line of chunk.split('\n').filter(Boolean)) ids.push(JSON.parse(line).ID);
        }
        expect(ids).toHaveLength(n);
        expect(new Set(ids).size).toBe(n);
        expect([...ids].sort()).toEqual(ids);
      }),
      120_000,
    );
  });
}
