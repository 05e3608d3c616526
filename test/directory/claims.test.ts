import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { HEARTBEAT_MS, heartbeat, markStaleAgents, STALE_AFTER_MS } from '../../src/directory/agents.js';
import { claimChanges, createChanges, reportChange } from '../../src/directory/changes.js';
import { Account } from '../../src/objects/account.js';
import { AccountChange } from '../../src/objects/accountchange.js';
import { App } from '../../src/objects/app.js';
import { RemoteAgent } from '../../src/objects/remoteagent.js';
import { User } from '../../src/objects/user.js';
import { openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { ObjectStore } from '../../src/store/objects.js';
import type { ServiceContext } from '../../src/store/service.js';
import { backends, freshLocation } from '../helpers.js';

/**
 * Leases (#16 item 1): agents on two service instances sharing one database claim at once; no
 * change is ever held by two, none is lost, and a crashed agent's change goes to the next claim
 * after its lease, whose holder alone may report it.
 */
describe.each(backends())('claiming account changes on %s', (backend) => {
  let a: ServiceContext;
  let b: ServiceContext;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const loc = await freshLocation(backend);
    const make = (store: ObjectStore): ServiceContext => ({
      store,
      db: store.db,
      logger: pino({ level: 'silent' }),
      config: loadServiceConfig({ env: {} }),
    });
    a = make(new ObjectStore(openDb(loc.location)));
    await migrate(a.db);
    b = make(new ObjectStore(openDb(loc.location)));
    cleanup = async () => {
      await a.db.close();
      await b.db.close();
      await loc.cleanup();
    };
  });
  afterAll(async () => cleanup?.());

  const setup = async (n: number, password = false) => {
    const { obj: app } = await a.store.create(App, {
      Name: `app-${Math.random()}`,
      Accounts: { InitialPassword: password },
    });
    const changes = [];
    for (let i = 0; i < n; i++) {
      const { obj: user } = await a.store.create(User, {
        UserName: `u${Math.random().toString(36).slice(2, 10)}`,
      });
      changes.push({ UserID: user.id, AppID: app.id, Action: 'create' });
    }
    const docs = await createChanges(a, changes, { by: 'system', approved: true });
    return { appId: app.id, ids: docs.map((d) => String(d.ID)) };
  };

  // SQLite is served by one instance (a second writer on the file gets SQLITE_BUSY, answered 503):
  // there the agents' claims race inside one process; on PostgreSQL across two instances.
  it('never gives one change to two agents, and loses none', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        async (n, agents, max) => {
          const { appId, ids } = await setup(n);
          const seen: string[] = [];
          for (let round = 0; round < n + 2; round++) {
            const batches = await Promise.all(
              Array.from({ length: agents }, (_, i) =>
                claimChanges(i % 2 === 0 || backend === 'sqlite' ? a : b, appId, `agent-${i}`, max, 300),
              ),
            );
            for (const batch of batches) for (const c of batch) seen.push(String(c.Change.ID));
            if (batches.every((x) => x.length === 0)) break;
          }
          expect([...seen].sort()).toEqual([...ids].sort());
        },
      ),
      { numRuns: 6 },
    );
  });

  it("hands a crashed agent's change to the next claim after its lease, with the same password", async () => {
    const { appId, ids } = await setup(1, true);
    const id = ids[0] as string;
    const [first] = await claimChanges(a, appId, 'crashes', 1, 10);
    expect(first?.InitialPassword).toBeDefined();
    // Within the lease nobody else gets it.
    expect(await claimChanges(b, appId, 'survivor', 5, 60)).toEqual([]);
    const later = Date.now() + 11_000;
    const spy = vi.spyOn(Date, 'now').mockReturnValue(later);
    try {
      const [second] = await claimChanges(b, appId, 'survivor', 5, 60);
      expect(second?.Change.ID).toBe(id);
      expect(second?.Change.Attempts).toBe(2);
      expect(second?.InitialPassword).toBe(first?.InitialPassword);
      // The crashed agent comes back: its lease is void.
      await expect(reportChange(a, appId, id, String(first?.Lease), 'applied', '')).rejects.toMatchObject({
        status: 409,
      });
      const done = await reportChange(b, appId, id, String(second?.Lease), 'applied', '');
      expect(done.State).toBe('applied');
      // A repeated report (the answer was lost) is recognised, not applied again.
      const again = await reportChange(b, appId, id, String(second?.Lease), 'applied', '');
      expect(again.State).toBe('applied');
      const change = await a.store.get(AccountChange, id);
      const account = await a.store.get(Account, `${appId}.${String(change?.doc.UserID)}`);
      expect(account?.doc).toMatchObject({ State: 'active', LastChangeID: id, HaveInitialPassword: true });
      expect(await claimChanges(a, appId, 'crashes', 5, 60)).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  });

  it('records a failure with its error, and a retried change is claimed again', async () => {
    const { appId, ids } = await setup(1);
    const [c] = await claimChanges(a, appId, 'x', 1, 60);
    const failed = await reportChange(
      a,
      appId,
      String(ids[0]),
      String(c?.Lease),
      'failed',
      'useradd: exit 9',
    );
    expect(failed).toMatchObject({ State: 'failed', Error: 'useradd: exit 9' });
    expect(await claimChanges(a, appId, 'x', 1, 60)).toEqual([]);
  });

  it('shows an agent that stopped reporting as stale, and ok again when it reports', async () => {
    const { appId } = await setup(0);
    const id = await heartbeat(a.store, appId, 'quiet', '1.0', '10.0.0.9');
    const health = async () => (await a.store.get(RemoteAgent, id))?.doc.Health;
    await markStaleAgents(a.store, Date.now() + 2 * HEARTBEAT_MS);
    expect(await health()).toBe('ok');
    await markStaleAgents(a.store, Date.now() + STALE_AFTER_MS + 2000);
    expect(await health()).toBe('stale');
    await heartbeat(a.store, appId, 'quiet', '1.1', '10.0.0.9');
    expect(await health()).toBe('ok');
  });

  it('hands out one change of an account at a time, even to concurrent claims', async () => {
    const { obj: app } = await a.store.create(App, { Name: `app-${Math.random()}` });
    const { obj: user } = await a.store.create(User, {
      UserName: `u${Math.random().toString(36).slice(2, 10)}`,
    });
    const docs = await createChanges(
      a,
      [
        { UserID: user.id, AppID: app.id, Action: 'create' },
        { UserID: user.id, AppID: app.id, Action: 'modify', AccountName: 'renamed' },
      ],
      { by: 'system', approved: true },
    );
    const batches = await Promise.all([
      claimChanges(a, app.id, 'one', 5, 300),
      claimChanges(backend === 'sqlite' ? a : b, app.id, 'two', 5, 300),
    ]);
    const held = batches.flat();
    expect(held).toHaveLength(1);
    const first = held[0] as (typeof held)[number];
    expect(await claimChanges(a, app.id, 'three', 5, 300)).toEqual([]);
    await reportChange(a, app.id, String(first.Change.ID), first.Lease, 'applied', '');
    const next = await claimChanges(a, app.id, 'three', 5, 300);
    expect(next.map((c) => c.Change.ID)).toEqual(
      docs.map((d) => d.ID).filter((id) => id !== first.Change.ID),
    );
  });
});
