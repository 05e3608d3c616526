import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { createServer } from '../api/server.js';
import { pruneAuditBatch } from '../audit/trail.js';
import type { ServiceConfig } from '../config/index.js';
import { parseListen } from '../config/setting.js';
import { createLogger } from '../core/logger.js';
import { startMetrics } from '../metrics/collector.js';
import { startPruner } from '../store/changelog.js';
import { openDb } from '../store/db.js';
import { migrate } from '../store/migrations.js';
import { ObjectStore } from '../store/objects.js';
import { bootstrap, createApiKey } from './bootstrap.js';

export interface RunningService {
  app: FastifyInstance;
  store: ObjectStore;
  url: string;
  close(): Promise<void>;
}

/**
 * Starts `gatehouse serve`: opens and migrates the database, prepares it on first start
 * (printing the first admin key once), and listens.
 */
export async function startService(
  config: ServiceConfig,
  opts: { logger?: Logger; announce?: (line: string) => void } = {},
): Promise<RunningService> {
  const logger = opts.logger ?? createLogger(config.server.loglevel);
  const db = openDb(config.server.database, {
    queryTimeoutMs: config.server.databasetimeout * 1000,
    onConnectionError: (err) => logger.warn({ err }, 'a database connection was lost'),
  });
  try {
    await migrate(db);
  } catch (e) {
    await db.close();
    throw e;
  }
  const store = new ObjectStore(db);
  const adminId = await bootstrap(store);
  if (adminId) {
    const key = await createApiKey(store, ['admin'], adminId, 'initial administrator key');
    const announce = opts.announce ?? ((line: string) => process.stdout.write(`${line}\n`));
    announce(
      'Gatehouse: first start. Created the tenant, the administrator user "admin" and this admin API key.',
    );
    announce('It is shown only this once; store it now (Authorization: Bearer <key>):');
    announce(`  ${key}`);
  }
  const { cert, key } = config.server;
  if ((cert === '') !== (key === '')) throw new Error('server.cert and server.key must be set together');
  const https = cert ? { cert: readFileSync(cert), key: readFileSync(key) } : undefined;
  const stopMetrics = startMetrics(store, logger);
  const auditPruner = startPruner(db, {
    retentionMs: config.server.auditretention * 1000,
    prune: pruneAuditBatch,
    onError: (err) => logger.warn({ err }, 'audit trail: pruning failed; trying again later'),
  });
  const pruner = startPruner(db, {
    retentionMs: config.server.changeretention * 1000,
    onError: (err) => logger.warn({ err }, 'change log: pruning failed; trying again later'),
    onPruned: (rows) => logger.debug({ rows }, 'change log: pruned'),
  });
  const app = await createServer({ store, db, logger, config, ...(https ? { https } : {}) });
  const { host, port } = parseListen(config.server.listen);
  await app.listen({ host, port });
  const addr = app.server.address();
  const boundPort = typeof addr === 'object' && addr ? addr.port : port;
  const url = `${https ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  logger.info({ url, database: db.describe }, 'gatehouse listening');
  return {
    app,
    store,
    url,
    async close() {
      await app.close();
      await pruner.stop();
      await auditPruner.stop();
      await stopMetrics();
      await db.close();
    },
  };
}
