import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIKey } from '../../src/objects/apikey.js';
import { Group } from '../../src/objects/group.js';
import { Script } from '../../src/objects/script.js';
import { Tenant } from '../../src/objects/tenant.js';
import { User } from '../../src/objects/user.js';
import type { ObjectType } from '../../src/schema/type.js';
import { type Db, openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import {
  CommitNotifier,
  LAZY_NOTIFY_MS,
  MAX_NOTICE_OBJECTS,
  readChangeNotice,
} from '../../src/store/notifier.js';
import { ObjectStore } from '../../src/store/objects.js';
import { CHANGES_CHANNEL } from '../../src/store/pgwrite.js';
import { backends } from '../helpers.js';
import { createPgDatabase } from '../pg.js';

/*
 * Other instances hear of a write from a NOTIFY sent after its COMMIT (src/store/pgwrite.ts,
 * CommitNotifier), never from inside the write's transaction, where PostgreSQL would make every
 * notifying commit of every instance wait for the one before it.
 */

interface Heard {
  writer: string;
  updated: Set<string>;
  created: Set<string>;
  /** How many groups named like `pattern` were readable when the notification had arrived. */
  readable?: number;
}

/** A pool whose queries record each NOTIFY's payload in `sent`; after failNext(), the next one fails as a lost connection. */
function recordingPool() {
  const sent: string[] = [];
  let fail = false;
  const pool = {
    query: async (_text: string, values: unknown[]) => {
      if (fail) {
        fail = false;
        throw new Error('Connection terminated unexpectedly');
      }
      sent.push(String(values[1]));
    },
  };
  return {
    pool: pool as unknown as pg.Pool,
    sent,
    failNext: () => {
      fail = true;
    },
  };
}

describe.skipIf(!backends().includes('postgres'))('commit notifications on PostgreSQL', () => {
  let url = '';
  let drop: () => Promise<void>;
  let db: Db;
  let store: ObjectStore;
  let listener: pg.Client;
  let reader: pg.Client;
  const heard: Heard[] = [];
  /** The names of the groups a test writes (SQL LIKE), counted when each notification arrives. */
  let pattern = '';
  let checks: Promise<void>[] = [];

  beforeAll(async () => {
    ({ url, drop } = await createPgDatabase('gh_notify'));
    db = openDb(url);
    await migrate(db);
    store = new ObjectStore(db);
    reader = new pg.Client({ connectionString: url });
    await reader.connect();
    listener = new pg.Client({ connectionString: url });
    await listener.connect();
    listener.on('notification', (msg) => {
      const notice = readChangeNotice(msg.payload ?? '');
      if (!notice || notice.writer !== store.notifyTag) return;
      const h: Heard = { ...notice };
      heard.push(h);
      checks.push(
        reader
          .query(
            `SELECT count(*)::int AS n FROM objects WHERE type = 'Group' AND data::jsonb->>'Name' LIKE $1`,
            [pattern],
          )
          .then((r) => {
            h.readable = r.rows[0].n;
          }),
      );
    });
    await listener.query(`LISTEN ${CHANGES_CHANNEL}`);
  });
  afterAll(async () => {
    await listener?.end();
    await reader?.end();
    await db?.close();
    await drop?.();
  });

  /**
   * Waits until every notification committed so far has arrived: PostgreSQL delivers them in
   * commit order, so once a marker NOTIFYed now arrives, every earlier one has. Then for their checks.
   */
  async function delivered() {
    const marker = `marker-${Math.random()}`;
    const arrived = new Promise<void>((resolve) => {
      const onMarker = (msg: pg.Notification) => {
        if (msg.payload !== marker) return;
        listener.off('notification', onMarker);
        resolve();
      };
      listener.on('notification', onMarker);
    });
    await reader.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, marker]);
    await arrived;
    await Promise.all(checks);
  }

  it('announces a write once it is committed: what it wrote is readable when the notification arrives', async () => {
    heard.length = 0;
    checks = [];
    pattern = 'notify-one';
    await store.create(Group, { Name: 'notify-one' });
    await store.notifier?.settled();
    await delivered();
    expect(heard).toHaveLength(1);
    expect(heard[0]?.created).toEqual(new Set([Group.kind]));
    expect(heard[0]?.updated).toEqual(new Set());
    expect(heard[0]?.readable).toBe(1);
  });

  it('writes that commit while a notification is on its way are announced together, their kinds merged', async () => {
    const { obj: g } = await store.create(Group, { Name: 'notify-updated' });
    await store.notifier?.settled();
    await delivered();
    heard.length = 0;
    checks = [];
    pattern = 'notify-many-%';
    const writes = 40;
    await Promise.all(
      Array.from({ length: writes }, async (_, i) => {
        if (i === writes - 1) await store.update(Group, g.id, { Name: 'notify-updated-2' }, '*');
        else await store.create(Group, { Name: `notify-many-${i}` });
      }),
    );
    await store.notifier?.settled();
    await delivered();
    expect(heard.length).toBeGreaterThan(0);
    expect(heard.length).toBeLessThan(writes);
    const all = (k: 'created' | 'updated') => new Set(heard.flatMap((h) => [...h[k]]));
    expect(all('created')).toEqual(new Set([Group.kind]));
    expect(all('updated')).toEqual(new Set([Group.kind]));
    // The last notification is sent after the last commit: every creation is readable by then.
    expect(heard[heard.length - 1]?.readable).toBe(writes - 1);
  });

  it('a notification that cannot be sent leaves the notifier working: the next write is announced, with what the lost one named', async () => {
    const { pool, sent, failNext } = recordingPool();
    failNext();
    const notifier = new CommitNotifier(pool, 'w1');
    notifier.committed([{ type: 'User', id: 'a', data: null, etag: '"e"', time: 0 }], true);
    await notifier.settled();
    expect(sent).toEqual([]);
    notifier.committed(
      [{ type: 'Group', id: 'b', data: '{}', etag: '"f"', time: 0, object: 'insert' }],
      true,
    );
    await notifier.settled();
    expect(sent.map((p) => readChangeNotice(p))).toEqual([
      { writer: 'w1', updated: new Set(['User']), created: new Set(['Group']), altered: new Set(['User a']) },
    ]);
  });

  it('a write other instances cache is answered only once its notification is sent; writes meanwhile share the next one', async () => {
    const sent: string[] = [];
    const inFlight: (() => void)[] = [];
    const pool = {
      query: (_text: string, values: unknown[]) =>
        new Promise<void>((resolve) => {
          sent.push(String(values[1]));
          inFlight.push(resolve);
        }),
    };
    const notifier = new CommitNotifier(pool as unknown as pg.Pool, 'w2');
    const answered: string[] = [];
    const write = (name: string, type: string, object?: 'insert') =>
      notifier.committed([{ type, id: name, data: null, etag: '"e"', time: 0, object }], true).then(() => {
        answered.push(name);
      });
    const first = write('a', 'User');
    await new Promise((r) => setTimeout(r, 10));
    expect(sent).toHaveLength(1);
    // Three more commit while the first NOTIFY is on its way.
    const rest = [write('b', 'Group', 'insert'), write('c', 'APIKey'), write('d', 'Group')];
    await new Promise((r) => setTimeout(r, 10));
    expect(answered).toEqual([]);
    expect(sent).toHaveLength(1);
    inFlight.shift()?.();
    await first;
    expect(answered).toEqual(['a']);
    await new Promise((r) => setTimeout(r, 10));
    // One NOTIFY for the three, naming what each changed.
    expect(sent).toHaveLength(2);
    expect(readChangeNotice(sent[1] as string)).toEqual({
      writer: 'w2',
      updated: new Set(['APIKey', 'Group']),
      created: new Set(['Group']),
      altered: new Set(['APIKey c', 'Group d']),
    });
    expect(answered).toEqual(['a']);
    inFlight.shift()?.();
    await Promise.all(rest);
    expect(answered).toEqual(['a', 'b', 'c', 'd']);
    await notifier.settled();
    expect(sent).toHaveLength(2);
  });

  it('a write no other instance caches is answered at once and announced within LAZY_NOTIFY_MS, with the others of that moment', async () => {
    const sent: { at: number; payload: string }[] = [];
    const pool = {
      query: async (_text: string, values: unknown[]) => {
        sent.push({ at: performance.now(), payload: String(values[1]) });
      },
    };
    const notifier = new CommitNotifier(pool as unknown as pg.Pool, 'w3');
    const t0 = performance.now();
    const group = (id: string) => [
      { type: 'Group', id, data: '{}', etag: '"e"', time: 0, object: 'insert' as const },
    ];
    let answered = 0;
    await Promise.all(
      ['a', 'b', 'c'].map((id) => notifier.committed(group(id), false).then(() => answered++)),
    );
    expect(answered).toBe(3);
    expect(sent).toEqual([]);
    await new Promise((r) => setTimeout(r, LAZY_NOTIFY_MS + 50));
    expect(sent).toHaveLength(1);
    expect((sent[0]?.at ?? 0) - t0).toBeGreaterThanOrEqual(LAZY_NOTIFY_MS - 1);
    expect(readChangeNotice(sent[0]?.payload ?? '')).toEqual({
      writer: 'w3',
      updated: new Set(),
      created: new Set(['Group']),
      altered: new Set(),
    });
    // A prompt write does not wait for the lazy delay, and takes what is pending with it.
    notifier.committed(group('d'), false);
    await notifier.committed([{ type: 'APIKey', id: 'k', data: null, etag: '"e"', time: 0 }], true);
    expect(sent).toHaveLength(2);
    expect(readChangeNotice(sent[1]?.payload ?? '')).toEqual({
      writer: 'w3',
      updated: new Set(['APIKey']),
      created: new Set(['Group']),
      altered: new Set(['APIKey k']),
    });
    // Shutting down sends what is pending at once.
    notifier.committed(group('e'), false);
    await notifier.settled();
    expect(sent).toHaveLength(3);
  });

  it('names each object updated or deleted, up to MAX_NOTICE_OBJECTS; past that, kinds only, until the next notice', async () => {
    const { pool, sent, failNext } = recordingPool();
    const notifier = new CommitNotifier(pool, 'w4');
    const update = (id: string) => ({
      type: 'User',
      id,
      data: '{}',
      etag: '"e"',
      time: 0,
      object: 'replace' as const,
    });
    const many = Array.from({ length: MAX_NOTICE_OBJECTS }, (_, i) => update(`u${i}`));
    // Exactly the limit: every object named, and no creation among them.
    await notifier.committed([...many, { ...update('new'), object: 'insert' }], true);
    expect(readChangeNotice(sent[0] ?? '')?.altered).toEqual(new Set(many.map((c) => `User ${c.id}`)));
    // One more: the notice names kinds only, which makes every cache of those kinds drop all.
    await notifier.committed([...many, update('one-more')], true);
    expect(readChangeNotice(sent[1] ?? '')).toEqual({
      writer: 'w4',
      updated: new Set(['User']),
      created: new Set(),
    });
    // A lost notice that named too many is not followed by one that names a few.
    failNext();
    await notifier.committed([...many, update('again')], true);
    await notifier.committed([{ type: 'APIKey', id: 'k', data: null, etag: '"e"', time: 0 }], true);
    expect(readChangeNotice(sent[2] ?? '')?.altered).toBeUndefined();
    expect(readChangeNotice(sent[2] ?? '')?.updated).toEqual(new Set(['User', 'APIKey']));
    // The next notice starts naming again; a notice without `o` (an older instance's) reads as unnamed.
    await notifier.committed([update('u1')], true);
    expect(readChangeNotice(sent[3] ?? '')?.altered).toEqual(new Set(['User u1']));
    expect(readChangeNotice(JSON.stringify({ w: 'x', u: ['User'], c: [] }))?.altered).toBeUndefined();
  });

  it('the store tells other instances before answering exactly the writes they cache: keys and users changed, scripts and the tenant', async () => {
    const cases: [ObjectType, 'create' | 'update', boolean][] = [
      [Group, 'create', false],
      [Group, 'update', false],
      [User, 'create', false],
      [User, 'update', true],
      [Script, 'create', true],
    ];
    for (const [type, op, prompt] of cases) {
      const calls: boolean[] = [];
      const notifier = store.notifier as CommitNotifier;
      const real = notifier.committed.bind(notifier);
      notifier.committed = (changes, p) => {
        calls.push(p);
        return real(changes, p);
      };
      try {
        const body =
          type === Script
            ? { Name: `s${Math.random()}`, Hook: 'user-write', Source: 'export default () => {}' }
            : type === Group
              ? { Name: `p${Math.random()}` }
              : {};
        const { obj } = await store.create(type, body);
        if (op === 'update') {
          calls.length = 0;
          await store.update(
            type,
            obj.id,
            type === Group
              ? { Name: `q${Math.random()}` }
              : { UserName: `u${Math.floor(Math.random() * 1e9)}` },
            '*',
          );
        }
      } finally {
        notifier.committed = real;
      }
      expect([type.kind, op, calls]).toEqual([type.kind, op, [prompt]]);
    }
    // Their notifications are read before the listener closes.
    await store.notifier?.settled();
    await delivered();
    expect(APIKey.cachedElsewhere).toBe('changes');
    expect(Tenant.cachedElsewhere).toBe('all');
  });
});
