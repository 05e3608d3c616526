import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { createServer, type ServerOptions } from '../src/api/server.js';
import { loadServiceConfig } from '../src/config/index.js';
import { bootstrap, createApiKey } from '../src/service/bootstrap.js';
import { type Db, openDb } from '../src/store/db.js';
import { LOG_START, type LogPosition } from '../src/store/logposition.js';
import { migrate } from '../src/store/migrations.js';
import { type Change, ObjectStore } from '../src/store/objects.js';
import type { ServiceState } from '../src/store/service.js';
import { createPgDatabase } from './pg.js';

export type Backend = 'sqlite' | 'postgres';

/** The backends this run covers (decided in global-setup). */
export function backends(): Backend[] {
  return (process.env.GATEHOUSE_TEST_ACTIVE_BACKENDS ?? 'sqlite').split(',').filter(Boolean) as Backend[];
}

/** A new, empty database location of the given backend, with its cleanup. */
export async function freshLocation(
  backend: Backend,
): Promise<{ location: string; cleanup: () => Promise<void> }> {
  if (backend === 'postgres') {
    const { url, drop } = await createPgDatabase();
    return { location: url, cleanup: drop };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
  return {
    location: join(dir, 'gatehouse.db'),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

export async function freshStore(
  backend: Backend,
): Promise<{ db: Db; store: ObjectStore; cleanup: () => Promise<void> }> {
  const { location, cleanup } = await freshLocation(backend);
  const db = openDb(location);
  await migrate(db);
  return {
    db,
    store: new ObjectStore(db),
    cleanup: async () => {
      await db.close();
      await cleanup();
    },
  };
}

/**
 * Two stores on one new, migrated database: two service instances on PostgreSQL, or two
 * connections to one SQLite file as two processes would have. `close` closes both and drops it.
 */
export async function twoStores(
  backend: Backend,
): Promise<{ a: ObjectStore; b: ObjectStore; close: () => Promise<void> }> {
  const loc = await freshLocation(backend);
  const a = new ObjectStore(openDb(loc.location));
  await migrate(a.db);
  const b = new ObjectStore(openDb(loc.location));
  return {
    a,
    b,
    close: async () => {
      await a.db.close();
      await b.db.close();
      await loc.cleanup();
    },
  };
}

export interface TestService {
  app: FastifyInstance;
  store: ObjectStore;
  db: Db;
  /** The service's own state (caches, queues, event buses: src/store/service.ts). */
  state: ServiceState;
  adminKey: string;
  adminId: string;
  /** Lines the service logged, to check that nothing secret was written. */
  logs: string[];
  /** Sends a request with the admin key unless headers.authorization is given ('' sends none). */
  req(opts: InjectOptions & { key?: string }): Promise<LightMyRequestResponse>;
  keyFor(scopes: string[], userId?: string): Promise<string>;
  close(): Promise<void>;
}

/** The service on a fresh database, served in-process (fastify inject: no sockets). */
export async function startTestService(
  backend: Backend,
  env: NodeJS.ProcessEnv = {},
  /** Timeouts, and the sign-in factors when not the registry's. */
  timeouts: Pick<ServerOptions, 'requestTimeoutMs' | 'idleTimeoutMs' | 'factors'> = {},
): Promise<TestService> {
  const { db, store, cleanup } = await freshStore(backend);
  const adminId = (await bootstrap(store)) as string;
  const adminKey = await createApiKey(store, ['admin'], adminId, 'test admin');
  const logs: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(line) });
  const config = loadServiceConfig({ env });
  const app = await createServer({ store, db, logger, config, ...timeouts });
  await app.ready();
  return {
    app,
    store,
    db,
    state: app.service.state as ServiceState,
    adminKey,
    adminId,
    logs,
    req(opts) {
      const { key, ...rest } = opts;
      const headers: Record<string, string> = { ...(rest.headers as Record<string, string>) };
      const k = key ?? adminKey;
      if (k !== '' && headers.authorization === undefined) headers.authorization = `Bearer ${k}`;
      if (headers.authorization === '') delete headers.authorization;
      if (
        rest.payload !== undefined &&
        typeof rest.payload === 'object' &&
        headers['content-type'] === undefined
      ) {
        headers['content-type'] = 'application/json';
      }
      return app.inject({ ...rest, headers });
    },
    keyFor: (scopes, userId = '') => createApiKey(store, scopes, userId, 'test key'),
    async close() {
      await app.close();
      await cleanup();
    },
  };
}

/** Parses a JSON-lines body. */
export const jsonLines = (body: string): Record<string, unknown>[] =>
  body
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/**
 * Every change after `from` in log order, as a reader gets them (ObjectStore.changesAfter): read
 * again while committed changes still wait behind a running transaction (another test file's,
 * on the same PostgreSQL server).
 */
export async function readLog(store: ObjectStore, from: LogPosition = LOG_START): Promise<Change[]> {
  const out: Change[] = [];
  let at = from;
  const until = Date.now() + 30_000;
  for (;;) {
    const r = await store.changesAfter(at, 10_000);
    out.push(...r.changes);
    const last = r.changes[r.changes.length - 1];
    if (last) at = { tx: last.tx, seq: last.seq };
    if (r.changes.length === 10_000) continue;
    if (!r.waiting) return out;
    if (Date.now() > until) throw new Error('the change log stayed behind a running transaction for 30 s');
    await new Promise((res) => setTimeout(res, 10));
  }
}
