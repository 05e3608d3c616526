import type { ServiceConfig } from '../config/index.js';
import { User } from '../objects/user.js';
import { SCOPES } from '../schema/type.js';
import { bootstrap, createApiKey } from '../service/bootstrap.js';
import { startService } from '../service/start.js';
import { openDb } from '../store/db.js';
import { migrate } from '../store/migrations.js';
import { ObjectStore } from '../store/objects.js';

/*
 * The service's commands. src/cli/main.ts imports this file only when one of them runs, so that
 * `gatehouse proxy` never loads the service's code and its dependencies.
 */

/** `gatehouse serve`: run until SIGTERM/SIGINT, then finish the requests in flight. */
export async function serveCommand(config: ServiceConfig) {
  const service = await startService(config);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.app.log.info({ signal }, 'shutting down: finishing requests in flight');
    await service.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

/** `gatehouse migrate`: apply pending migrations and say which. */
export async function migrateCommand(config: ServiceConfig) {
  const db = openDb(config.server.database);
  try {
    const applied = await migrate(db);
    process.stderr.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  } finally {
    await db.close();
  }
}

/** `gatehouse apikey create`: prepare the database if new, create a key, print only the key. */
export async function apikeyCreateCommand(
  config: ServiceConfig,
  opts: { scope: string[]; user?: string | undefined; name: string },
) {
  const unknown = opts.scope.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0)
    throw new Error(`--scope: ${unknown.join(', ')} is not a scope (one of ${SCOPES.join(', ')})`);
  const db = openDb(config.server.database);
  try {
    await migrate(db);
    const store = new ObjectStore(db);
    await bootstrap(store);
    if (opts.user && !(await store.get(User, opts.user))) throw new Error(`--user: no user ${opts.user}`);
    process.stdout.write(`${await createApiKey(store, opts.scope, opts.user ?? '', opts.name)}\n`);
  } finally {
    await db.close();
  }
}
