import { EventEmitter } from 'node:events';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceContext } from '../../src/api/context.js';
import type { Principal } from '../../src/auth/principal.js';
import { loadServiceConfig } from '../../src/config/index.js';
import { EventHub, type EventSocket } from '../../src/events/hub.js';
import { Group } from '../../src/objects/group.js';
import { backends, freshStore } from '../helpers.js';

/** A socket whose send buffer the test controls: it never drains unless told to. */
class FakeSocket extends EventEmitter {
  bufferedAmount = 0;
  readyState = 1;
  sent: string[] = [];
  closedWith: { code: number; reason: string } | undefined;
  send(data: Buffer | string) {
    this.sent.push(String(data));
  }
  close(code: number, reason: string) {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }
  terminate() {
    this.readyState = 3;
  }
  ping() {}
  /** A client message. */
  message(obj: unknown) {
    this.emit('message', Buffer.from(JSON.stringify(obj)), false);
  }
}

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
});
