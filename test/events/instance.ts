import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { createServer } from '../../src/api/server.js';
import { loadServiceConfig } from '../../src/config/index.js';
import { type Db, openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { ObjectStore } from '../../src/store/objects.js';
import type { ServiceState } from '../../src/store/service.js';

export interface Instance {
  app: FastifyInstance;
  store: ObjectStore;
  db: Db;
  /** The service's own state (its session and audit buses, caches): src/store/service.ts. */
  state: ServiceState | undefined;
  url: string;
}

/** A service instance on an existing database, listening on loopback (as a second `gatehouse serve`). */
export async function startInstance(location: string): Promise<Instance> {
  const db = openDb(location);
  await migrate(db);
  const store = new ObjectStore(db);
  const app = await createServer({
    store,
    db,
    logger: pino({ level: 'silent' }),
    config: loadServiceConfig({ env: {} }),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    app,
    store,
    db,
    state: app.service.state,
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
  };
}
