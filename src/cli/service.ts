import { createSetupLink } from '../auth/setuplinks.js';
import { ConfigError, type ServiceConfig } from '../config/index.js';
import { TENANT_ID, Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import { SCOPES } from '../schema/type.js';
import {
  activeAdminByEmail,
  createApiKey,
  listenUrl,
  setupLinkLines,
  setupLinkUrl,
  signinBaseFor,
} from '../service/bootstrap.js';
import { startService } from '../service/start.js';
import { backupSqlite, type Db, isPostgresUrl, openDb, sqliteFileExists } from '../store/db.js';
import { migrate, migrationStatus } from '../store/migrations.js';
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

/** Opens the database for `migrate`, which may create it; failures name server.database. */
function open(config: ServiceConfig): Db {
  try {
    return openDb(config.server.database);
  } catch (e) {
    throw new ConfigError(
      'server.database',
      `cannot open ${config.server.database}: ${(e as Error).message}`,
    );
  }
}

/**
 * Opens a database that must exist already and be up to date (every command but serve and
 * migrate): a typo in --database must not create a new database and hand out a key to it, and a
 * command of a newer version must not change the schema under a running older service.
 */
async function openExisting(config: ServiceConfig): Promise<Db> {
  const location = config.server.database;
  if (!isPostgresUrl(location) && !sqliteFileExists(location))
    throw new ConfigError(
      'server.database',
      `${location} does not exist (gatehouse serve or gatehouse migrate creates a database; check the path)`,
    );
  const db = open(config);
  try {
    const all = await migrationStatus(db);
    const pending = all.filter((m) => !m.appliedAt);
    if (pending.length === all.length)
      throw new ConfigError(
        'server.database',
        `${db.describe} is not a Gatehouse database (no migration applied)`,
      );
    if (pending.length > 0)
      throw new ConfigError(
        'server.database',
        `${db.describe} is not up to date (${pending.length} pending migrations); run gatehouse migrate first`,
      );
  } catch (e) {
    await db.close().catch(() => undefined);
    if (e instanceof ConfigError) throw e;
    throw new ConfigError('server.database', `cannot use ${db.describe}: ${(e as Error).message}`);
  }
  return db;
}

/** `gatehouse migrate`: apply pending migrations and say which; `--status`: list them, applying none. */
export async function migrateCommand(config: ServiceConfig, opts: { status?: boolean } = {}) {
  if (opts.status && !isPostgresUrl(config.server.database) && !sqliteFileExists(config.server.database))
    throw new ConfigError('server.database', `${config.server.database} does not exist`);
  const db = open(config);
  try {
    if (opts.status) {
      for (const m of await migrationStatus(db))
        process.stdout.write(`${m.appliedAt ? `applied ${m.appliedAt}` : 'pending'}  ${m.name}\n`);
      return;
    }
    const applied = await migrate(db).catch((e: Error) => {
      throw new ConfigError('server.database', `cannot use ${db.describe}: ${e.message}`);
    });
    process.stderr.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  } finally {
    await db.close();
  }
}

/** `gatehouse apikey create`: create a key in an existing database, print only the key. */
export async function apikeyCreateCommand(
  config: ServiceConfig,
  opts: { scope: string[]; user?: string | undefined; name: string },
) {
  const unknown = opts.scope.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0)
    throw new Error(`--scope: ${unknown.join(', ')} is not a scope (one of ${SCOPES.join(', ')})`);
  const db = await openExisting(config);
  try {
    const store = new ObjectStore(db);
    if (opts.user && !(await store.get(User, opts.user))) throw new Error(`--user: no user ${opts.user}`);
    process.stdout.write(`${await createApiKey(store, opts.scope, opts.user ?? '', opts.name)}\n`);
  } finally {
    await db.close();
  }
}

/**
 * `gatehouse recover --email <address>`: break-glass for a locked-out administrator. Prints a
 * one-time sign-in URL where the administrator chooses a new password; refuses (exit 1, no URL)
 * an address that is not an active administrator's.
 */
export async function recoverCommand(config: ServiceConfig, email: string) {
  const db = await openExisting(config);
  try {
    const store = new ObjectStore(db);
    const admin = await activeAdminByEmail(store, email);
    const token = await createSetupLink({ db }, admin.id, config.bootstrap.linkseconds);
    const tenant = (await store.get(Tenant, TENANT_ID))?.doc ?? {};
    const base = signinBaseFor(config, String(tenant.SigninURL ?? ''), listenUrl(config));
    const lines = setupLinkLines(
      String(admin.doc.Email),
      setupLinkUrl(base, token),
      config.bootstrap.linkseconds,
    );
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await db.close();
  }
}

/**
 * `gatehouse backup <file>`: a consistent copy of a SQLite database, safe while the service runs
 * and writes. PostgreSQL has its own tool for this: the command says how, and writes nothing.
 */
export async function backupCommand(config: ServiceConfig, file: string) {
  if (isPostgresUrl(config.server.database)) {
    const url = new URL(config.server.database);
    url.password = '';
    throw new Error(
      `server.database is PostgreSQL: back it up with pg_dump, for example\n  pg_dump --format=custom --file ${file} '${url.toString()}'\nand restore with pg_restore (docs/operations.md, "Backup and restore")`,
    );
  }
  const db = await openExisting(config);
  try {
    await backupSqlite(db, file);
    process.stderr.write(`backed up ${db.describe} to ${file}\n`);
  } finally {
    await db.close();
  }
}
