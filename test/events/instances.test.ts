import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { createSession, saveSession } from '../../src/auth/session/sessions.js';
import type { EventSocket } from '../../src/events/hub.js';
import { APIKey, hashApiKey } from '../../src/objects/apikey.js';
import { Group } from '../../src/objects/group.js';
import { User } from '../../src/objects/user.js';
import { bootstrap, createApiKey } from '../../src/service/bootstrap.js';
import type { Db } from '../../src/store/db.js';
import { alteredObject } from '../../src/store/objects.js';
import { backends, freshLocation } from '../helpers.js';
import { EventClient, FakeSocket } from './client.js';
import { type Instance, startInstance } from './instance.js';

describe.each(backends())('event streams across instances on %s', (backend) => {
  let a: Instance;
  let b: Instance;
  let key: string;
  let cleanup: () => Promise<void>;
  const clients: EventClient[] = [];

  beforeAll(async () => {
    const loc = await freshLocation(backend);
    cleanup = loc.cleanup;
    a = await startInstance(loc.location);
    b = await startInstance(loc.location);
    const adminId = (await bootstrap(a.store)) as string;
    key = await createApiKey(a.store, ['admin'], adminId, 'test admin');
  });
  afterAll(async () => {
    for (const c of clients) c.ws.terminate();
    await a?.app.close();
    await a?.db.close();
    await b?.app.close().catch(() => {});
    await b?.db.close().catch(() => {});
    await cleanup?.();
  });

  it('a change made through one instance reaches a subscriber on the other', async () => {
    if (backend === 'sqlite') {
      // No NOTIFY on SQLite: another process's writes are found by the safety-net poll.
      b.app.events.configure({ pollIntervalMs: 100 });
    }
    const c = await EventClient.open(b.url, key);
    clients.push(c);
    c.send({ Kind: 'Group' });
    await c.caughtUp('Group');
    const n0 = c.frames.length;
    const started = Date.now();
    const { obj } = await a.store.create(Group, { Name: 'cross-instance' });
    await c.count(n0 + 1, 5000);
    expect(c.frames[n0]).toMatchObject({ ID: obj.id, Kind: 'Group', Item: { Name: 'cross-instance' } });
    if (backend === 'postgres') {
      // Woken by NOTIFY, not by the 5 s poll.
      expect(Date.now() - started).toBeLessThan(2000);
    }
    await a.store.delete(Group, obj.id, '*');
    await c.count(n0 + 2, 5000);
    expect(c.frames[n0 + 1]).toEqual({ ID: obj.id, Item: {}, Kind: 'Group' });
  });

  // LISTEN/NOTIFY across instances exists only on PostgreSQL: registered for it alone.
  if (backend === 'postgres')
    it('loses no change when the LISTEN connection drops (poll and re-LISTEN)', async () => {
      b.app.events.configure({ pollIntervalMs: 300 });
      const c = await EventClient.open(b.url, key);
      clients.push(c);
      c.send({ Kind: 'Group' });
      await c.caughtUp('Group');
      const n0 = c.frames.length;
      // Kill b's LISTEN connection, then write at once: that notification is lost.
      const pool = a.db.pool as NonNullable<Db['pool']>;
      const killed = await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND (query ILIKE 'LISTEN%' OR query = 'SELECT 1') AND pid <> pg_backend_pid()`,
      );
      expect(killed.rowCount).toBeGreaterThan(0);
      const { obj } = await a.store.create(Group, { Name: 'while-deaf' });
      await c.count(n0 + 1, 5000);
      expect(c.frames[n0]).toMatchObject({ ID: obj.id, Item: { Name: 'while-deaf' } });
      // And it listens again: a later change arrives without waiting for the slow poll.
      b.app.events.configure({ pollIntervalMs: 60_000 });
      await new Promise((r) => setTimeout(r, 1500));
      await a.store.create(Group, { Name: 'after-relisten' });
      await c.count(n0 + 2, 3000);
      expect(c.frames[n0 + 1]?.Item.Name).toBe('after-relisten');
    });

  // LISTEN/NOTIFY across instances exists only on PostgreSQL: registered for it alone.
  if (backend === 'postgres')
    it("ends a session's streams on the other instance too", async () => {
      const { obj: user } = await a.store.create(User, {});
      const { session } = await createSession(a, { deviceId: 'device-x', userId: user.id });
      const principal: Principal = {
        via: 'session',
        userId: user.id,
        scopes: new Set(['user']),
        sessionId: session.id,
        integrityLevel: session.level,
      };
      const sock = new FakeSocket();
      await b.app.events.accept(sock as unknown as EventSocket, principal);
      expect(sock.closedWith).toBeUndefined();
      await a.app.events.sessionIntegrityChanged(session.id);
      const end = Date.now() + 3000;
      while (!sock.closedWith && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      expect(sock.closedWith?.code).toBe(1000);
      expect(JSON.parse(sock.sent[0] ?? '{}')).toMatchObject({
        StatusCode: 100,
        StatusText: 'Integrity Level Changed',
      });
    });

  // LISTEN/NOTIFY across instances exists only on PostgreSQL: registered for it alone.
  if (backend === 'postgres')
    it('a session level change on one instance ends its stream on the other', async () => {
      const { obj: user } = await a.store.create(User, {});
      const { session } = await createSession(a, { deviceId: 'device-y', userId: user.id });
      const principal: Principal = {
        via: 'session',
        userId: user.id,
        scopes: new Set(['user']),
        sessionId: session.id,
        integrityLevel: session.level,
      };
      const sock = new FakeSocket();
      await b.app.events.accept(sock as unknown as EventSocket, principal);
      expect(sock.closedWith).toBeUndefined();
      // The two halves of the relay are checked apart (each instance has its own session bus).
      // 1: a session write on A is announced over NOTIFY.
      const pool = a.db.pool as NonNullable<Db['pool']>;
      const listener = new pg.Client(pool.options);
      await listener.connect();
      const heard: string[] = [];
      listener.on('notification', (m) => heard.push(m.payload ?? ''));
      await listener.query('LISTEN gatehouse_event_signals');
      try {
        await saveSession(a, { ...session, data: { UserAgent: 'touch' } });
        const until = Date.now() + 3000;
        while (!heard.some((h) => h.includes(session.id)) && Date.now() < until)
          await new Promise((r) => setTimeout(r, 10));
        expect(JSON.parse(heard.find((h) => h.includes(session.id)) ?? '{}')).toMatchObject({
          Event: 'SessionChanged',
          SessionID: session.id,
          UserID: user.id,
        });
      } finally {
        await listener.end();
      }
      expect(sock.closedWith).toBeUndefined(); // same level: the stream stays
      // 2: B acts on such a notice from another process: the level was raised behind its back.
      await sql`UPDATE sessions SET level = level + 1 WHERE id = ${session.id}`.execute(a.db.kysely);
      await new Promise((r) => setTimeout(r, 100));
      expect(sock.closedWith).toBeUndefined();
      const notice = JSON.stringify({
        Event: 'SessionChanged',
        SessionID: session.id,
        UserID: user.id,
        From: 'elsewhere',
      });
      await sql`SELECT pg_notify('gatehouse_event_signals', ${notice})`.execute(a.db.kysely);
      const end = Date.now() + 3000;
      while (!sock.closedWith && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      expect(sock.closedWith?.code).toBe(1000);
      expect(JSON.parse(sock.sent[0] ?? '{}')).toMatchObject({ StatusCode: 100 });
    });

  // LISTEN/NOTIFY across instances exists only on PostgreSQL: registered for it alone.
  if (backend === 'postgres')
    it('a session ended while the LISTEN connection was down closes its stream once it listens again', async () => {
      const { obj: user } = await a.store.create(User, {});
      const { session } = await createSession(a, { deviceId: 'device-z', userId: user.id });
      const principal: Principal = {
        via: 'session',
        userId: user.id,
        scopes: new Set(['user']),
        sessionId: session.id,
        integrityLevel: session.level,
      };
      const sock = new FakeSocket();
      await b.app.events.accept(sock as unknown as EventSocket, principal);
      expect(sock.closedWith).toBeUndefined();
      // Every LISTEN connection of this database goes (a PostgreSQL restart or failover), and the
      // session ends meanwhile: its signal reaches nobody, as on the instance that handled it.
      // A listener's last statement is LISTEN, or, once it is older than a poll interval, the
      // tailer's liveness check (SELECT 1).
      const pool = a.db.pool as NonNullable<Db['pool']>;
      const killed = await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND (query ILIKE 'LISTEN%' OR query = 'SELECT 1') AND pid <> pg_backend_pid()`,
      );
      expect(killed.rowCount).toBeGreaterThan(0);
      await sql`DELETE FROM sessions WHERE id = ${session.id}`.execute(a.db.kysely);
      // B re-LISTENs after 0.5 s and checks its session streams then (not at the 30 s ping).
      const end = Date.now() + 5000;
      while (!sock.closedWith && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(sock.closedWith?.code).toBe(4001);
    });

  // LISTEN/NOTIFY across instances exists only on PostgreSQL: registered for it alone.
  if (backend === 'postgres')
    it('an instance LISTENs from its start, before any stream is opened on it', async () => {
      const pool = a.db.pool as NonNullable<Db['pool']>;
      const listening = async () =>
        Number(
          (
            await pool.query(
              `SELECT count(*) AS n FROM pg_stat_activity
              WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
            )
          ).rows[0].n,
        );
      const before = await listening();
      const c = await startInstance(a.db.pool?.options.connectionString as string);
      try {
        const end = Date.now() + 5000;
        while ((await listening()) <= before && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
        expect(await listening()).toBeGreaterThan(before);
        expect(c.app.events.size).toBe(0);
      } finally {
        await c.app.close();
        await c.db.close();
      }
    });

  /**
   * What instance A hears of the other instances' commits (the store's 'remote' event): the kinds
   * each updated or deleted, the kinds it created, and the objects it updated or deleted.
   * `until` waits up to 5 s for a notice to match; `stop` stops listening.
   */
  function hearRemote() {
    type Heard = {
      updated?: ReadonlySet<string>;
      created?: ReadonlySet<string>;
      objects?: ReadonlySet<string>;
    };
    const heard: Heard[] = [];
    const listener = (
      updated?: ReadonlySet<string>,
      created?: ReadonlySet<string>,
      objects?: ReadonlySet<string>,
    ) => heard.push({ updated, created, objects });
    a.store.commits.on('remote', listener);
    return {
      until: async (what: (h: Heard) => boolean) => {
        const end = Date.now() + 5000;
        while (!heard.some(what) && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
        expect(heard.some(what)).toBe(true);
      },
      stop: () => a.store.commits.off('remote', listener),
    };
  }

  // LISTEN/NOTIFY across instances exists only on PostgreSQL: registered for it alone.
  if (backend === 'postgres')
    it("a key deleted through one instance is refused by the other at once, not at its cache's end", async () => {
      const { until, stop } = hearRemote();
      try {
        const { obj: user } = await a.store.create(User, {});
        const k = await createApiKey(a.store, ['user'], user.id, 'short-lived');
        const me = () => fetch(`${a.url}/users/me`, { headers: { authorization: `Bearer ${k}` } });
        expect((await me()).status).toBe(200); // validated and cached on A
        // B's creation is announced as a creation only: nothing for A's key cache to drop.
        await b.store.create(Group, { Name: 'unrelated-creation' });
        await until((h) => h.created?.has('Group') === true && h.updated?.size === 0);
        const stored = await b.store.findByKey(APIKey, 'KeyHash', hashApiKey(k));
        expect(stored).toBeDefined();
        await b.store.delete(APIKey, (stored as { id: string }).id, '*');
        // B's delete is announced as such; A's cache drops the key as it hears it.
        await until((h) => h.updated?.has('APIKey') === true);
        expect((await me()).status).toBe(401);
      } finally {
        stop();
      }
    });

  if (backend === 'postgres')
    it("a user changed through one instance drops that user's keys on the other, and no one else's", async () => {
      const { until, stop } = hearRemote();
      const { obj: u1 } = await a.store.create(User, {});
      const { obj: u2 } = await a.store.create(User, {});
      const k1 = await createApiKey(a.store, ['user'], u1.id, 'changed user');
      const k2 = await createApiKey(a.store, ['user'], u2.id, 'bystander');
      const me = (k: string) => fetch(`${a.url}/users/me`, { headers: { authorization: `Bearer ${k}` } });
      expect([(await me(k1)).status, (await me(k2)).status]).toEqual([200, 200]); // both cached on A
      const lookups = vi.spyOn(a.store, 'findByKeyWithRef');
      try {
        await b.store.update(User, u1.id, { Disabled: true }, '*');
        await until((h) => h.objects?.has(alteredObject(User.kind, u1.id)) === true);
        // The changed user's key is read again (and refused); the bystander's stays cached.
        expect((await me(k1)).status).toBe(401);
        expect((await me(k2)).status).toBe(200);
        expect(lookups).toHaveBeenCalledTimes(1);
      } finally {
        lookups.mockRestore();
        stop();
      }
    });

  it('closes its streams with 1001 when the instance shuts down', async () => {
    const c = await EventClient.open(b.url, key);
    clients.push(c);
    c.send({ Kind: 'Group' });
    await c.caughtUp('Group');
    await b.app.close();
    const closed = await c.waitClose();
    expect(closed.code).toBe(1001);
  });
});
