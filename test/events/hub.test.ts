import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { createSession } from '../../src/auth/session/sessions.js';
import { loadServiceConfig } from '../../src/config/index.js';
import { EventHub, type EventSocket } from '../../src/events/hub.js';
import { Group } from '../../src/objects/group.js';
import { User } from '../../src/objects/user.js';
import type { ServiceContext } from '../../src/store/service.js';
import { backends, freshStore } from '../helpers.js';
import { FakeSocket } from './client.js';

const admin: Principal = { via: 'apikey', userId: '', scopes: new Set(['admin']) };

describe.each(backends())('event hub limits on %s', (backend) => {
  let hub: EventHub;
  let ctx: ServiceContext;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    const f = await freshStore(backend);
    cleanup = f.cleanup;
    ctx = {
      store: f.store,
      db: f.db,
      logger: pino({ level: 'silent' }),
      config: loadServiceConfig({ env: {} }),
    };
    hub = new EventHub(ctx, { maxBufferedBytes: 1000, snapshotHighWaterBytes: 500, snapshotStallMs: 200 });
  });
  afterAll(async () => {
    await hub?.close();
    await cleanup?.();
  });

  const until = async (pred: () => boolean, ms = 3000) => {
    const end = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > end) throw new Error('timed out');
      await new Promise((r) => setTimeout(r, 5));
    }
  };

  it('closes a slow consumer with 4008 instead of buffering without bound', async () => {
    const sock = new FakeSocket();
    await hub.accept(sock as unknown as EventSocket, admin);
    sock.message({ Kind: 'Group' });
    await until(() => sock.sent.some((f) => f.includes('"ID":""')));
    // The client stops reading: its buffer passes the limit, and the next change closes it.
    sock.bufferedAmount = 5000;
    await ctx.store.create(Group, { Name: 'slow-1' });
    await until(() => sock.closedWith !== undefined);
    expect(sock.closedWith?.code).toBe(4008);
    expect(sock.sent.some((f) => f.includes('slow-1'))).toBe(false);
    expect(hub.size).toBe(0);
  });

  it('paces a snapshot to the reader and gives up with 4008 when it stalls', async () => {
    for (let i = 0; i < 3; i++) await ctx.store.create(Group, { Name: `snap-${i}` });
    const sock = new FakeSocket();
    await hub.accept(sock as unknown as EventSocket, admin);
    sock.bufferedAmount = 800; // above the high-water mark, below the hard limit
    sock.message({ Kind: 'Group' });
    await new Promise((r) => setTimeout(r, 100));
    expect(sock.sent).toHaveLength(0); // waiting for the buffer to drain
    sock.bufferedAmount = 0; // the reader catches up
    await until(() => sock.sent.some((f) => f.includes('"ID":""')));
    expect(sock.closedWith).toBeUndefined();

    const stalled = new FakeSocket();
    await hub.accept(stalled as unknown as EventSocket, admin);
    stalled.bufferedAmount = 800;
    stalled.message({ Kind: 'Group' });
    await until(() => stalled.closedWith !== undefined);
    expect(stalled.closedWith?.code).toBe(4008);
  });

  it('closes a connection that floods requests faster than they are answered (1008)', async () => {
    const sock = new FakeSocket();
    await hub.accept(sock as unknown as EventSocket, admin);
    for (let i = 0; i < 300; i++) sock.message({ Kind: 'Group', ID: `g${i}` });
    expect(sock.closedWith?.code).toBe(1008);
    const calm = new FakeSocket();
    await hub.accept(calm as unknown as EventSocket, admin);
    for (let i = 0; i < 50; i++) calm.message({ Kind: 'Group', ID: `g${i}` });
    await until(() => calm.sent.length >= 50); // a marker each (no such groups)
    expect(calm.closedWith).toBeUndefined();
    calm.terminate();
    hub.endStreams(() => true);
  });

  it('refuses more subscriptions than the limit with a 429 frame', async () => {
    hub.configure({ maxSubscriptions: 2 });
    const sock = new FakeSocket();
    await hub.accept(sock as unknown as EventSocket, admin);
    sock.message({ Kind: 'Group' });
    sock.message({ Kind: 'User' });
    sock.message({ Kind: 'App' });
    await until(() => sock.sent.length >= 3 && sock.sent.some((f) => f.includes('"StatusCode":429')));
    expect(sock.closedWith).toBeUndefined();
    hub.configure({ maxSubscriptions: 64 });
  });

  it('closes the streams of a session whose integrity changed (100 frame) or that ended (4001)', async () => {
    const { obj: user } = await ctx.store.create(User, {});
    const sessions = new Map<string, string>();
    for (const name of ['one', 'two', 'three']) {
      const { session } = await createSession(ctx, { deviceId: `device-${name}`, userId: user.id });
      sessions.set(name, session.id);
    }
    const session = (name: string): Principal => ({
      via: 'session',
      userId: user.id,
      scopes: new Set(['user']),
      sessionId: sessions.get(name),
      integrityLevel: 1,
    });
    const s1 = new FakeSocket();
    const s2 = new FakeSocket();
    const s3 = new FakeSocket();
    await hub.accept(s1 as unknown as EventSocket, session('one'));
    await hub.accept(s2 as unknown as EventSocket, session('two'));
    await hub.accept(s3 as unknown as EventSocket, session('three'));
    await hub.sessionIntegrityChanged(sessions.get('one') as string);
    expect(s1.sent.map((f) => JSON.parse(f))).toEqual([
      { ID: '', Item: {}, StatusCode: 100, StatusText: 'Integrity Level Changed' },
    ]);
    expect(s1.closedWith?.code).toBe(1000);
    await hub.sessionEnded(sessions.get('two') as string);
    expect(s2.closedWith?.code).toBe(4001);
    expect(s2.sent).toEqual([]);
    expect(s3.closedWith).toBeUndefined();
    hub.endStreams(() => true);
  });
});
