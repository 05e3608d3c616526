#!/usr/bin/env node
import { Command, Option } from 'commander';
import { ConfigError, loadServiceConfig, serverSection } from '../config/index.js';
import type { Setting } from '../config/setting.js';
import { SCOPES } from '../objects/apikey.js';
import { User } from '../objects/user.js';
import { proxyFlagSettings, runProxyCommand } from '../proxy/cli.js';
import { startService } from '../service.js';
import { bootstrap, createApiKey } from '../store/bootstrap.js';
import { openDb } from '../store/db.js';
import { migrate } from '../store/migrations.js';
import { ObjectStore } from '../store/objects.js';

const program = new Command('gatehouse').description(
  'Identity and access management service with an access proxy',
);

/** Adds a flag for each setting of a section that has one, with its env variable and default in the help. */
function settingFlags(cmd: Command, section: Record<string, Setting<unknown>>) {
  for (const s of Object.values(section)) {
    if (!s.flag) continue;
    cmd.addOption(
      new Option(
        `--${s.flag} <value>`,
        `${s.description} (${s.key}, ${s.env}; default ${JSON.stringify(s.default)})`,
      ),
    );
  }
  return cmd.option('-C, --config <file>', 'INI-like settings file with section.name keys');
}

/** commander camel-cases flag names; settings are keyed by the flag as written. */
function flagValues(opts: Record<string, unknown>, section: Record<string, Setting<unknown>>) {
  const out: Record<string, string | undefined> = {};
  for (const s of Object.values(section)) {
    if (!s.flag) continue;
    const camel = s.flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const v = opts[camel];
    if (typeof v === 'string') out[s.flag] = v;
  }
  return out;
}

function configFrom(opts: Record<string, unknown>) {
  return loadServiceConfig({
    file: typeof opts.config === 'string' ? opts.config : undefined,
    env: process.env,
    flags: flagValues(opts, serverSection),
  });
}

async function openStore(opts: Record<string, unknown>) {
  const config = configFrom(opts);
  const db = openDb(config.server.database);
  await migrate(db);
  return { db, store: new ObjectStore(db) };
}

settingFlags(
  program.command('serve').description('Run the service (applies migrations first)'),
  serverSection,
).action(async (opts: Record<string, unknown>) => {
  const service = await startService(configFrom(opts));
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
});

program
  .command('migrate')
  .description('Apply pending database migrations')
  .option('--database <location>', 'SQLite file or postgres:// URL')
  .option('-C, --config <file>', 'settings file')
  .action(async (opts: Record<string, unknown>) => {
    const config = configFrom(opts);
    const db = openDb(config.server.database);
    try {
      const applied = await migrate(db);
      process.stderr.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
    } finally {
      await db.close();
    }
  });

settingFlags(
  program
    .command('proxy')
    .description('Run the access proxy in front of an application')
    .option(
      '-c <path_prefix_setting=value>',
      'path-prefix override, e.g. -c path_/static/_auth=none (repeatable)',
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    ),
  proxyFlagSettings,
).action(async (opts: Record<string, unknown>) => {
  await runProxyCommand(
    flagValues(opts, proxyFlagSettings),
    typeof opts.config === 'string' ? opts.config : undefined,
    (opts.c as string[] | undefined) ?? [],
  );
});

const apikey = program.command('apikey').description('Manage API keys directly in the database');
apikey
  .command('create')
  .description('Create an API key and print it (only the key) on stdout')
  .addOption(
    new Option('--scope <scope...>', 'one or more scopes').choices([...SCOPES]).makeOptionMandatory(),
  )
  .option('--user <id>', 'the user the key acts for')
  .option('--name <name>', 'a name to recognise the key by', 'created by gatehouse apikey create')
  .option('--database <location>', 'SQLite file or postgres:// URL')
  .option('-C, --config <file>', 'settings file')
  .action(async (opts: { scope: string[]; user?: string; name: string } & Record<string, unknown>) => {
    const { db, store } = await openStore(opts);
    try {
      await bootstrap(store);
      if (opts.user && !(await store.get(User, opts.user))) throw new Error(`--user: no user ${opts.user}`);
      process.stdout.write(`${await createApiKey(store, opts.scope, opts.user ?? '', opts.name)}\n`);
    } finally {
      await db.close();
    }
  });

program.parseAsync().catch((e: unknown) => {
  const msg =
    e instanceof ConfigError
      ? `configuration error: ${e.message}`
      : e instanceof Error
        ? e.message
        : String(e);
  process.stderr.write(`gatehouse: ${msg}\n`);
  process.exit(1);
});
