import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloseCodes, RESYNC } from '../../src/events/protocol.js';
import { Group } from '../../src/objects/group.js';
import { bootstrap, createApiKey } from '../../src/service/bootstrap.js';
import { pruneBatch } from '../../src/store/changelog.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { backends, freshLocation } from '../helpers.js';
import { EventClient } from './client.js';
import { type Instance, startInstance } from './instance.js';

/*
 * An instance whose event tailer could not read the change log for a while (its database
 * connection failing, say) while another instance kept writing. Once it can read again:
 * - with the changes still in the log, its subscribers get every one of them, once, in order;
 * - with some pruned meanwhile (change-log retention), they are told to resync (StatusCode 205,
 *   close 4009) and a new subscription's snapshot holds everything.
 */

/**
 * Makes the instance's change-log reads fail until the returned function is called; resolves once
 * a read has failed. The tailer reads one batch at a time, so from then on no read begun earlier
 * (a poll already waiting for its rows) can still deliver changes written after this.
 */
async function failReads(store: ObjectStore): Promise<() => void> {
  const real = store.changesAfter.bind(store);
  let failed = () => {};
  const once = new Promise<void>((resolve) => {
    failed = resolve;
  });
  store.changesAfter = () => {
    failed();
    return Promise.reject(new Error('connection terminated (simulated)'));
  };
  await once;
  return () => {
    store.changesAfter = real;
  };
}

describe.each(backends())('event stream after the tailer fell behind, on %s', (backend) => {
  let writer: Instance;
  let reader: Instance;
  let key: string;
  let cleanup: () => Promise<void>;
  const clients: EventClient[] = [];

  beforeAll(async () => {
    const loc = await freshLocation(backend);
    cleanup = loc.cleanup;
    writer = await startInstance(loc.location);
    reader = await startInstance(loc.location);
    const adminId = (await bootstrap(writer.store)) as string;
    key = await createApiKey(writer.store, ['admin'], adminId, 'test admin');
    // Wake-ups come from NOTIFY (PostgreSQL) or this poll (SQLite has no NOTIFY).
    reader.app.events.configure({ pollIntervalMs: 100 });
  });
  afterAll(async () => {
    for (const c of clients) c.ws.terminate();
    for (const i of [writer, reader]) {
      await i?.app.close().catch(() => {});
      await i?.db.close().catch(() => {});
    }
    await cleanup?.();
  });

  async function subscribe() {
    const c = await EventClient.open(reader.url, key);
    clients.push(c);
    c.send({ Kind: 'Group' });
    const snapshot = await c.caughtUp('Group');
    return { c, snapshot };
  }

  it('catches up from the change log: every change written meanwhile arrives once, in order', async () => {
    const { c } = await subscribe();
    const n0 = c.frames.length;
    const restore = await failReads(reader.store);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await writer.store.create(Group, { Name: `during ${i}` })).obj.id);
    await new Promise((r) => setTimeout(r, 400));
    expect(c.frames.length).toBe(n0);
    restore();
    await c.count(n0 + ids.length, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const got = c.frames.slice(n0);
    expect(got.map((f) => f.ID)).toEqual(ids);
    expect(c.closed).toBeUndefined();
    c.close();
  });

  it('tells subscribers to resync when changes were pruned before they were read', async () => {
    const { c } = await subscribe();
    const n0 = c.frames.length;
    const restore = await failReads(reader.store);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await writer.store.create(Group, { Name: `lost ${i}` })).obj.id);
    // A retention of "now": everything but the newest row goes.
    while ((await pruneBatch(writer.db, Date.now() + 1)) > 0) {}
    restore();
    const closed = await c.waitClose(10_000);
    expect(closed.code).toBe(CloseCodes.Resync);
    const status = c.frames.slice(n0).filter((f) => f.StatusCode !== undefined);
    expect(status).toEqual([{ ID: '', Item: {}, ...RESYNC }]);
    // Resubscribing: the snapshot holds every object, the lost ones included.
    const again = await subscribe();
    const shown = new Set(again.snapshot.map((f) => f.ID));
    for (const id of ids) expect(shown.has(id)).toBe(true);
    // And the stream is live again.
    const n1 = again.c.frames.length;
    const { obj } = await writer.store.create(Group, { Name: 'after resync' });
    await again.c.count(n1 + 1, 10_000);
    expect(again.c.frames[n1]?.ID).toBe(obj.id);
  });
});
