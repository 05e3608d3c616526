import { readFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { createServer } from '../api/server.js';
import { pruneAuditBatch } from '../audit/trail.js';
import { createSetupLink } from '../auth/setuplinks.js';
import { ConfigError, type ServiceConfig } from '../config/index.js';
import { parseListen } from '../config/setting.js';
import { Jobs } from '../core/jobs.js';
import { createLogger } from '../core/logger.js';
import { scheduleMetrics } from '../metrics/collector.js';
import { startPruner } from '../store/changelog.js';
import { type Db, openDb } from '../store/db.js';
import { migrate } from '../store/migrations.js';
import { ObjectStore } from '../store/objects.js';
import { type ServiceContext, ServiceState } from '../store/service.js';
import { bootstrap, createApiKey, setupLinkLines, setupLinkUrl, signinBaseFor } from './bootstrap.js';

export interface RunningService {
  app: FastifyInstance;
  store: ObjectStore;
  url: string;
  close(): Promise<void>;
}

/**
 * Is server.listen free? Asked before anything is created or printed, so a port in use stops
 * start-up with a message naming the setting instead of after the database was made and the
 * admin key shown (and lost). Port 0 (any free port) needs no asking.
 */
async function checkListen(listen: string): Promise<void> {
  const { host, port } = parseListen(listen);
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', (e: NodeJS.ErrnoException) => {
      const why =
        e.code === 'EADDRINUSE'
          ? 'the address is in use (another program, or another gatehouse, listens there)'
          : e.code === 'EACCES'
            ? 'this user may not listen there (ports below 1024 need privileges)'
            : e.code === 'EADDRNOTAVAIL'
              ? 'no network interface of this machine has that address'
              : e.message;
      reject(new ConfigError('server.listen', `cannot listen on ${listen}: ${why}`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** Opens and migrates the database; any failure is about server.database and says so. */
async function openMigrated(config: ServiceConfig, logger: Logger): Promise<Db> {
  const location = config.server.database;
  let db: Db;
  try {
    db = openDb(location, {
      queryTimeoutMs: config.server.databasetimeout * 1000,
      onConnectionError: (err) => logger.warn({ err }, 'a database connection was lost'),
      backgroundCheckpoints: true,
    });
  } catch (e) {
    throw new ConfigError('server.database', `cannot open ${location}: ${(e as Error).message}`);
  }
  try {
    await migrate(db);
  } catch (e) {
    await db.close().catch(() => undefined);
    throw new ConfigError('server.database', `cannot use ${db.describe}: ${(e as Error).message}`);
  }
  return db;
}

/**
 * Starts `gatehouse serve`: checks that server.listen is free, opens and migrates the database,
 * prepares it on first start (printing the first admin key once, and with bootstrap.email a
 * one-time sign-in URL for the administrator), and listens.
 */
export async function startService(
  config: ServiceConfig,
  opts: { logger?: Logger; announce?: (line: string) => void } = {},
): Promise<RunningService> {
  const logger = opts.logger ?? createLogger(config.server.loglevel);
  const { cert, key } = config.server;
  if ((cert === '') !== (key === '')) throw new Error('server.cert and server.key must be set together');
  const https = cert ? { cert: readFileSync(cert), key: readFileSync(key) } : undefined;
  await checkListen(config.server.listen);
  const db = await openMigrated(config, logger);
  const store = new ObjectStore(db);
  const email = config.bootstrap.email;
  const adminId = await bootstrap(store, email);
  const firstStart: string[] = [];
  let setupToken = '';
  if (adminId) {
    const apiKey = await createApiKey(store, ['admin'], adminId, 'initial administrator key');
    firstStart.push(
      `Gatehouse: first start. Created the tenant, the administrator user "admin"${email ? ` (${email})` : ''} and this admin API key.`,
      'It is shown only this once; store it now (Authorization: Bearer <key>):',
      `  ${apiKey}`,
    );
    if (email) setupToken = await createSetupLink({ db }, adminId, config.bootstrap.linkseconds);
  }
  // The service object: it owns the caches (state) and the background jobs, started when the
  // server is ready and stopped when it closes (createServer adds the rest: src/api/server.ts).
  const jobs = new Jobs((err, name) => logger.warn({ err, job: name }, `${name} failed; trying again later`));
  const service: ServiceContext = { store, db, logger, config, jobs, state: new ServiceState() };
  scheduleMetrics(service);
  startPruner(
    db,
    { retentionMs: config.server.auditretention * 1000, prune: pruneAuditBatch },
    jobs,
    'audit trail pruning',
  );
  startPruner(
    db,
    {
      retentionMs: config.server.changeretention * 1000,
      onPruned: (rows) => logger.debug({ rows }, 'change log: pruned'),
    },
    jobs,
    'change log pruning',
  );
  const app = await createServer({ ...service, ...(https ? { https } : {}) });
  const { host, port } = parseListen(config.server.listen);
  await app.listen({ host, port });
  const addr = app.server.address();
  const boundPort = typeof addr === 'object' && addr ? addr.port : port;
  const url = `${https ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  // Printed once listening, so the URL names the port actually bound (server.listen may say :0).
  if (setupToken) {
    const reachable = url.replace('://0.0.0.0:', '://localhost:').replace('://[::]:', '://localhost:');
    const link = setupLinkUrl(signinBaseFor(config, '', reachable), setupToken);
    firstStart.push(...setupLinkLines(email, link, config.bootstrap.linkseconds));
  }
  const announce = opts.announce ?? ((line: string) => process.stdout.write(`${line}\n`));
  for (const line of firstStart) announce(line);
  logger.info({ url, database: db.describe }, 'gatehouse listening');
  return {
    app,
    store,
    url,
    async close() {
      await app.close(); // stops the background jobs (src/api/server.ts)
      // The last writes commit, and the other instances hear of them, before the connections go.
      await store.settled();
      await db.close();
    },
  };
}
