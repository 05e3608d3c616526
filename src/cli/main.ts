#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { Command, Option } from 'commander';
import { ConfigError, loadServiceConfig, serverSection, unknownServiceEnv } from '../config/index.js';
import { proxyFlagSettings } from '../config/proxy.js';
import type { Setting } from '../config/setting.js';

// Every command loads its program only when it runs (dynamic imports below): `gatehouse proxy` must
// not load the service (Fastify, Kysely, the database drivers), as test/structure/modules.test.ts checks.

// No allocation-site pretenuring, set before any command loads its program. V8 watches where
// objects that survive two young-generation collections were made and, past a ratio, makes that
// place allocate straight in the old generation. A server's per-request objects outlive a
// collection or two under load and die soon after; when a start-up happened to tip a site over,
// the process stayed for good with requests' objects in the old generation: scavenges 16 times
// slower, a major collection every second, and GET /users/:id at half its rate (docs/benchmarks.md,
// "A GET at two speeds"). Which processes it hit was chance; without it none was.
setFlagsFromString('--no-allocation-site-pretenuring');

/**
 * package.json's version (src/cli/ and dist/cli/ are both two levels below package.json). A build
 * elsewhere (a test compiles the CLI into a folder of its own) has none: it says so rather than fail.
 */
function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown (no package.json beside this build)';
  }
}

const program = new Command('gatehouse')
  .description('Identity and access management service with an access proxy')
  .version(packageVersion(), '-V, --version', 'print the version and exit');

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
  // A misspelt variable (SVC_SERVER_LISTN) would otherwise be ignored without a word.
  for (const name of unknownServiceEnv(process.env))
    process.stderr.write(`gatehouse: warning: ${name} is not a setting; ignored (check its spelling)\n`);
  return loadServiceConfig({
    file: typeof opts.config === 'string' ? opts.config : undefined,
    env: process.env,
    flags: flagValues(opts, serverSection),
  });
}

settingFlags(
  program.command('serve').description('Run the service (applies migrations first)'),
  serverSection,
).action(async (opts: Record<string, unknown>) => {
  const { serveCommand } = await import('./service.js');
  await serveCommand(configFrom(opts));
});

program
  .command('migrate')
  .description('Apply pending database migrations (creates the database if new)')
  .option('--status', 'list the migrations, applied (with when) and pending, and apply none')
  .option('--database <location>', 'SQLite file or postgres:// URL')
  .option('-C, --config <file>', 'settings file')
  .action(async (opts: Record<string, unknown>) => {
    const { migrateCommand } = await import('./service.js');
    await migrateCommand(configFrom(opts), { status: opts.status === true });
  });

program
  .command('backup')
  .description(
    'Write a consistent copy of the SQLite database to <file>, also while the service runs (PostgreSQL: use pg_dump)',
  )
  .argument('<file>', 'where the copy goes (replaced if it exists)')
  .option('--database <location>', 'SQLite file or postgres:// URL')
  .option('-C, --config <file>', 'settings file')
  .action(async (file: string, opts: Record<string, unknown>) => {
    const { backupCommand } = await import('./service.js');
    await backupCommand(configFrom(opts), file);
  });

// The serve flags too: the URL points where the service is reached (server.listen, publicurl, signinurl).
settingFlags(
  program
    .command('recover')
    .description(
      'Print a one-time sign-in URL where an active administrator chooses a new password (break-glass)',
    )
    .requiredOption('--email <address>', "the administrator's e-mail address"),
  serverSection,
).action(async (opts: { email: string } & Record<string, unknown>) => {
  const { recoverCommand } = await import('./service.js');
  await recoverCommand(configFrom(opts), opts.email);
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
  const { runProxyCommand } = await import('../proxy/cli.js');
  await runProxyCommand(
    flagValues(opts, proxyFlagSettings),
    typeof opts.config === 'string' ? opts.config : undefined,
    (opts.c as string[] | undefined) ?? [],
  );
});

const apikey = program.command('apikey').description('Manage API keys directly in the database');
apikey
  .command('create')
  .description('Create an API key in an existing database and print it (only the key) on stdout')
  // The scopes are checked against SCOPES when the command runs (./service.js); a test holds this list to it.
  .requiredOption('--scope <scope...>', 'one or more scopes: user, audit, sync, admin')
  .option('--user <id>', 'the user the key acts for')
  .option('--name <name>', 'a name to recognise the key by', 'created by gatehouse apikey create')
  .option('--database <location>', 'SQLite file or postgres:// URL')
  .option('-C, --config <file>', 'settings file')
  .action(async (opts: { scope: string[]; user?: string; name: string } & Record<string, unknown>) => {
    const { apikeyCreateCommand } = await import('./service.js');
    await apikeyCreateCommand(configFrom(opts), opts);
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
