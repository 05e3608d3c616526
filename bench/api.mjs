#!/usr/bin/env node
// API benchmark of `gatehouse serve` on SQLite and on PostgreSQL (issue 2, "How we will check").
// Usage: node bench/api.mjs [--quick] [--help]; see HELP below and docs/benchmarks.md.
// One file of ~550 lines on purpose: a benchmark reads top to bottom (scenarios, runs, report);
// what other benchmarks share lives in bench/lib/.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startBareFastify } from './lib/bare.mjs';
import { detectTool, runLoad, running, wrkVersion } from './lib/load.mjs';
import { machineInfo } from './lib/machine.mjs';
import { cpuPlan } from './lib/pin.mjs';
import { createTempDatabase } from './lib/postgres.mjs';
import { measureCpu, sampleRss } from './lib/proc.mjs';
import { fmt, markdownTable } from './lib/report.mjs';
import { countObjects, seedObjects } from './lib/seed.mjs';
import { ensureBuilt, liveServers, startServer } from './lib/server.mjs';
import { readWholeBody } from './lib/stream.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');

const HELP = `node bench/api.mjs [options]

Starts \`node dist/cli/main.js serve\` on a new SQLite database, then on a new PostgreSQL
database, and measures GET /users/:id (1,000 users in turn), POST /users and a list of all
users (GET /users).

  --quick               short smoke run: 2 s per scenario, 10,000 users, one list read
  --backends <list>     sqlite,postgres (default: both, in that order)
  --tool <name>         wrk | autocannon | auto (default auto: wrk when installed)
  --duration <s>        seconds per load scenario (default 10; 2 with --quick)
  --get-connections <n> concurrent connections for GET (default 32)
  --post-connections <n> concurrent connections for POST (default 16)
  --users <n>           users in the list scenario (default 100000; 10000 with --quick)
  --list-runs <n>       how many times the list is read (default 3; 1 with --quick)
  --pg-url <url>        an existing PostgreSQL database to create the throwaway one from
                        (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/postgres)
  --root <dir>          the checkout whose dist/ is served (default: this one), e.g. to
                        compare a build before and after a change
  --pin                 run each server on CPUs 1.. and wrk on CPU 0 (taskset), so that they
                        never share a CPU: steadier GET figures, lower POST (docs/benchmarks.md)
  --json <file>         also write the JSON summary to this file
  --strict              exit 1 when a SQLite target is missed (default: only on errors)
  --help
`;

const TARGETS = {
  getRps: { text: '>= 10,000/s (SQLite)', ok: (v) => v >= 10_000 },
  postRps: { text: '>= 3,000/s (SQLite)', ok: (v) => v >= 3_000 },
  listSeconds: { text: '< 2 s (SQLite)', ok: (v) => v < 2 },
  listRssMB: { text: '< 100 MB (SQLite)', ok: (v) => v < 100 },
};

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    backends: { type: 'string', default: 'sqlite,postgres' },
    tool: { type: 'string', default: 'auto' },
    duration: { type: 'string' },
    'get-connections': { type: 'string', default: '32' },
    'post-connections': { type: 'string', default: '16' },
    users: { type: 'string' },
    'list-runs': { type: 'string' },
    'pg-url': {
      type: 'string',
      default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    },
    json: { type: 'string' },
    root: { type: 'string', default: HERE },
    strict: { type: 'boolean', default: false },
    pin: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

const positiveInt = (raw, name) => {
  const v = Number(raw);
  if (!Number.isInteger(v) || v <= 0) {
    process.stderr.write(`--${name} must be a positive whole number\n`);
    process.exit(2);
  }
  return v;
};
const ROOT = args.root;
const quick = args.quick;
const settings = {
  quick,
  durationS: positiveInt(args.duration ?? (quick ? '2' : '10'), 'duration'),
  warmupS: quick ? 1 : 2,
  getConnections: positiveInt(args['get-connections'], 'get-connections'),
  postConnections: positiveInt(args['post-connections'], 'post-connections'),
  users: positiveInt(args.users ?? (quick ? '10000' : '100000'), 'users'),
  listRuns: positiveInt(args['list-runs'] ?? (quick ? '1' : '3'), 'list-runs'),
  tool: args.tool === 'auto' ? detectTool() : args.tool,
  wrkThreads: 1,
  pinning: cpuPlan(args.pin),
};
if (!['wrk', 'autocannon'].includes(settings.tool)) {
  process.stderr.write('--tool must be wrk, autocannon or auto\n');
  process.exit(2);
}
const backendNames = args.backends.split(',').map((s) => s.trim());
for (const b of backendNames) {
  if (b !== 'sqlite' && b !== 'postgres') {
    process.stderr.write(`--backends: unknown backend ${JSON.stringify(b)} (sqlite, postgres)\n`);
    process.exit(2);
  }
}

const started = performance.now();
const log = (msg) => {
  const t = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
  process.stderr.write(`[bench ${t}s] ${msg}\n`);
};

// Everything started is undone at the end, also on Ctrl-C: load generators and servers first,
// then the registered undos (databases) in reverse order. Each undo runs once, whoever calls it.
const undos = [];
function onCleanup(fn) {
  let done;
  const once = () => {
    done ??= Promise.resolve().then(fn);
    return done;
  };
  undos.push(once);
  return once;
}
async function cleanupAll() {
  for (const p of running) p.kill('SIGKILL');
  await Promise.all([...liveServers].map((stop) => stop()));
  for (const undo of [...undos].reverse()) {
    try {
      await undo();
    } catch (e) {
      log(`cleanup failed: ${e instanceof Error ? e.message : e}`);
    }
  }
}
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    log(`${sig}: stopping`);
    void cleanupAll().finally(() => process.exit(130));
  });
}

/** Prepares a fresh database for a backend; returns its location and how to remove it. */
async function freshDatabase(name) {
  if (name === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
    return {
      location: join(dir, 'gatehouse.db'),
      remove: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const db = await createTempDatabase(args['pg-url']);
  return { location: db.url, remove: () => db.drop(), describe: `postgres database ${db.name}` };
}

/** Which code was measured: the commit, whether src/ had uncommitted changes, when dist/ was built. */
function buildInfo(root) {
  const git = (...a) => {
    try {
      return execFileSync('git', ['-C', root, ...a], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    } catch {
      return undefined;
    }
  };
  const status = git('status', '--porcelain', '--', 'src');
  let distBuilt;
  try {
    distBuilt = statSync(join(root, 'dist/cli/main.js')).mtime.toISOString();
  } catch {
    distBuilt = undefined;
  }
  return {
    commit: git('rev-parse', '--short', 'HEAD'),
    srcChanged: status === undefined ? undefined : status !== '',
    distBuilt,
  };
}

const mb = (kib) => (kib === undefined ? undefined : Math.round((kib / 1024) * 10) / 10);

/** What every load run of this benchmark shares: the tool, its threads and CPUs. */
const loadBase = (connections) => ({
  tool: settings.tool,
  connections,
  threads: settings.wrkThreads,
  cpus: settings.pinning.load,
});

/** One load scenario: a warm-up run (not reported), then the measured run with CPU figures. */
async function loadScenario(server, label, req, connections) {
  const base = { ...loadBase(connections), ...req };
  log(`${label}: warm-up ${settings.warmupS} s`);
  await runLoad({ ...base, durationS: settings.warmupS });
  log(`${label}: ${settings.durationS} s with ${connections} connections (${settings.tool})`);
  const cpu = measureCpu(server.pid);
  const r = await runLoad({ ...base, durationS: settings.durationS });
  const result = { ...r, connections, ...cpu.stop() };
  log(
    `${label}: ${fmt(r.rps)} req/s, p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, ` +
      `errors ${r.errors}, error statuses ${r.non2xx}; server CPU ${result.serverCpuPct}%`,
  );
  if (r.errors > 0 || r.non2xx > 0) {
    throw new Error(`${label}: ${r.errors} connection errors and ${r.non2xx} error statuses`);
  }
  return result;
}

/** How many users GET /users/:id reads in turn. */
const READ_USERS = 1000;

/** Creates `count` users with POST /users {}, 16 at a time; returns their IDs. */
async function createUsers(url, auth, count) {
  const ids = [];
  for (let made = 0; made < count; made += 16) {
    const batch = Array.from({ length: Math.min(16, count - made) }, async () => {
      const r = await fetch(`${url}/users`, {
        method: 'POST',
        headers: { ...auth, 'Content-Type': 'application/json' },
        body: '{}',
      });
      await r.arrayBuffer();
      const id = r.headers.get('x-id');
      if (r.status !== 201 || !id) throw new Error(`POST /users answered ${r.status}`);
      return id;
    });
    ids.push(...(await Promise.all(batch)));
  }
  return ids;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Alternating short runs of `a` and `b` (3 rounds); each round's a ÷ b. */
async function pairedRounds(a, b, label) {
  const seconds = Math.max(1, Math.round(settings.durationS / 3));
  const base = loadBase(settings.getConnections);
  const rounds = [];
  for (let i = 0; i < 3; i++) {
    const ra = await runLoad({ ...base, ...a, durationS: seconds });
    const rb = await runLoad({ ...base, ...b, durationS: seconds });
    rounds.push({ a: ra.rps, b: rb.rps, ratio: Math.round((ra.rps / rb.rps) * 100) / 100 });
    log(`${label}: round ${i + 1}: ${fmt(ra.rps)} vs ${fmt(rb.rps)} req/s (${rounds[i].ratio})`);
  }
  return rounds;
}

/**
 * The number of objects once writes have stopped: requests the load generator sent just before it
 * closed its connections may still be committing, so count until two counts agree.
 */
async function settledCount(location, kind) {
  let before = await countObjects(location, kind);
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const now = await countObjects(location, kind);
    if (now === before) return now;
    before = now;
  }
  throw new Error(`the number of ${kind} objects kept changing after the load stopped`);
}

async function benchBackend(name) {
  const title = name === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  const out = { name, title };
  const db = await freshDatabase(name);
  const removeDb = onCleanup(db.remove);
  out.database = db.describe ?? 'SQLite file in a temporary directory';
  log(`${title}: starting the server`);
  let server;
  try {
    server = await startServer({ root: ROOT, database: db.location, cpus: settings.pinning.server });
  } catch (e) {
    await removeDb();
    throw e;
  }
  const auth = { Authorization: `Bearer ${server.key}` };

  try {
    // A user to read, created through the API; its JSON is also the template for seeding.
    const [userId] = await createUsers(server.url, auth, 1);
    const got = await fetch(`${server.url}/users/${userId}`, { headers: auth });
    const template = await got.text();
    if (got.status !== 200) throw new Error(`GET /users/${userId} answered ${got.status}: ${template}`);
    // GET reads these users in turn, as many clients would read many objects, not one object
    // over and over (reads of one ID in the same instant share one database read).
    const paths = [userId, ...(await createUsers(server.url, auth, READ_USERS - 1))].map(
      (id) => `/users/${id}`,
    );
    const getUsers = { url: server.url, paths, headers: auth };
    const getBare = (bare) => ({ url: bare.url, paths });

    out.get = await loadScenario(server, `${title} GET /users/:id`, getUsers, settings.getConnections);
    // The reference: a bare Fastify route serving the same body (issue 24), in rounds that
    // alternate with GET itself, so that a machine shared with others loads both alike; the ratio
    // is the median of the rounds' ratios.
    const bare = await startBareFastify(ROOT, template, settings.pinning.server);
    try {
      out.bare = await loadScenario(
        bare,
        `${title} bare Fastify GET (reference)`,
        getBare(bare),
        settings.getConnections,
      );
      out.getVsBareRounds = await pairedRounds(getUsers, getBare(bare), `${title} GET vs bare Fastify`);
    } finally {
      await bare.stop();
    }
    out.getVsBare = median(out.getVsBareRounds.map((r) => r.ratio));
    const postUsers = {
      url: `${server.url}/users`,
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: '{}',
    };
    out.post = await loadScenario(server, `${title} POST /users`, postUsers, settings.postConnections);
    // Writes against reads of the same server (issue 24), alternated like the reference above,
    // each with its own number of connections.
    out.postVsGetRounds = await pairedRounds(
      { ...postUsers, connections: settings.postConnections },
      getUsers,
      `${title} POST vs GET`,
    );
    out.postVsGet = median(out.postVsGetRounds.map((r) => r.ratio));

    // The list: top up to the wanted number of users, then read GET /users (no limit) whole.
    const existing = await settledCount(db.location, 'User');
    const toSeed = Math.max(0, settings.users - existing);
    log(`${title}: ${fmt(existing)} users exist; seeding ${fmt(toSeed)} more directly in the database`);
    const t0 = performance.now();
    await seedObjects(db.location, 'User', template, toSeed);
    const seedS = (performance.now() - t0) / 1000;
    const users = await settledCount(db.location, 'User');
    log(`${title}: seeded in ${seedS.toFixed(1)} s; ${fmt(users)} users`);

    const runs = [];
    for (let i = 0; i < settings.listRuns; i++) {
      const rss = sampleRss(server.pid);
      const r = await readWholeBody(`${server.url}/users`, auth);
      const mem = rss.stop();
      if (r.status !== 200) throw new Error(`GET /users answered ${r.status}`);
      if (!String(r.contentType).startsWith('application/x-json-lines')) {
        throw new Error(`GET /users answered with Content-Type ${r.contentType}`);
      }
      if (r.lines !== users) throw new Error(`GET /users returned ${r.lines} lines for ${users} users`);
      const run = {
        seconds: Math.round(r.totalMs) / 1000,
        firstByteMs: Math.round(r.firstByteMs ?? 0),
        megabytes: Math.round((r.bytes / 2 ** 20) * 10) / 10,
        rssBeforeMB: mb(mem.baselineKiB),
        rssPeakMB: mb(mem.peakKiB),
        rssGrowthMB: mb(mem.growthKiB),
        peakFrom: mem.hwmReset ? 'VmHWM reset before the read, and VmRSS samples' : 'VmRSS samples only',
        rssSamples: mem.samples,
      };
      runs.push(run);
      log(
        `${title} GET /users (${fmt(users)} users): ${run.seconds} s, ${run.megabytes} MB, ` +
          `RSS ${run.rssBeforeMB} -> peak ${run.rssPeakMB} MB (+${run.rssGrowthMB} MB)`,
      );
    }
    const sorted = [...runs].sort((a, b) => a.seconds - b.seconds);
    out.list = {
      users,
      seeded: toSeed,
      seedSeconds: Math.round(seedS * 10) / 10,
      runs,
      // The median read time, and the largest memory growth of any read (the conservative figure).
      seconds: sorted[Math.floor((sorted.length - 1) / 2)].seconds,
      rssGrowthMB: Math.max(...runs.map((r) => r.rssGrowthMB ?? Number.NaN)),
    };
  } finally {
    const exit = await server.stop();
    out.serverExit = exit;
    log(`${title}: server stopped (${JSON.stringify(exit)})`);
    await removeDb();
  }
  if (out.serverExit.code !== 0) {
    throw new Error(`the server did not shut down cleanly on SIGTERM: ${JSON.stringify(out.serverExit)}`);
  }
  return out;
}

async function main() {
  await ensureBuilt(ROOT, log);
  const summary = {
    benchmark: 'gatehouse API (bench/api.mjs)',
    date: new Date().toISOString(),
    machine: machineInfo(),
    build: buildInfo(ROOT),
    settings: {
      ...settings,
      generator:
        settings.tool === 'wrk'
          ? `${wrkVersion() ?? 'wrk'}, ${settings.wrkThreads} thread, no pipelining`
          : 'autocannon (in the benchmark process), pipelining 1',
    },
    backends: [],
    errors: [],
  };
  log(
    `machine: ${summary.machine.nproc} CPUs, ${summary.machine.cpuModel}, load ${summary.machine.loadAvg.join(' ')}; ` +
      `generator ${summary.settings.generator}`,
  );
  for (const name of backendNames) {
    try {
      summary.backends.push(await benchBackend(name));
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      log(`${name}: FAILED: ${message}`);
      summary.errors.push({ backend: name, message });
      summary.backends.push({ name, title: name === 'sqlite' ? 'SQLite' : 'PostgreSQL', error: message });
    }
  }
  const after = machineInfo();
  summary.loadAvgAfter = after.loadAvg;
  summary.cpuPressureAfter = after.cpuPressure;
  summary.seconds = Math.round((performance.now() - started) / 100) / 10;

  const sqlite = summary.backends.find((b) => b.name === 'sqlite' && !b.error);
  summary.targets = sqlite
    ? {
        getRps: {
          value: sqlite.get.rps,
          target: TARGETS.getRps.text,
          met: TARGETS.getRps.ok(sqlite.get.rps),
        },
        postRps: {
          value: sqlite.post.rps,
          target: TARGETS.postRps.text,
          met: TARGETS.postRps.ok(sqlite.post.rps),
        },
        listSeconds: {
          value: sqlite.list.seconds,
          target: TARGETS.listSeconds.text,
          met: TARGETS.listSeconds.ok(sqlite.list.seconds),
        },
        listRssMB: {
          value: sqlite.list.rssGrowthMB,
          target: TARGETS.listRssMB.text,
          met: TARGETS.listRssMB.ok(sqlite.list.rssGrowthMB),
        },
        // The list targets are for 100,000 users; a --quick or --users run does not check them.
        comparable: !quick && settings.users === 100_000 && settings.durationS >= 10,
      }
    : undefined;

  const ok = summary.backends.filter((b) => !b.error);
  const values = (f) => Object.fromEntries(ok.map((b) => [b.name, f(b)]));
  const usersLabel = fmt(settings.users);
  const table = markdownTable(ok, [
    {
      scenario: 'GET /users/:id',
      metric: 'requests/s',
      values: values((b) => b.get.rps),
      target: TARGETS.getRps,
    },
    {
      scenario: '',
      metric: 'latency p50',
      unit: 'ms',
      digits: 2,
      values: values((b) => b.get.latencyMs.p50),
    },
    {
      scenario: '',
      metric: 'latency p99',
      unit: 'ms',
      digits: 2,
      values: values((b) => b.get.latencyMs.p99),
    },
    { scenario: '', metric: 'server CPU', unit: '%', values: values((b) => b.get.serverCpuPct) },
    {
      scenario: 'bare Fastify, same body (reference)',
      metric: 'requests/s',
      values: values((b) => b.bare.rps),
    },
    {
      scenario: '',
      metric: 'GET /users/:id ÷ bare Fastify (median of 3 alternating rounds)',
      digits: 2,
      values: values((b) => b.getVsBare),
      target: { text: '>= 0.5 (issue 24)', ok: (v) => v >= 0.5 },
    },
    {
      scenario: 'POST /users {}',
      metric: 'requests/s',
      values: values((b) => b.post.rps),
      target: TARGETS.postRps,
    },
    {
      scenario: '',
      metric: 'latency p50',
      unit: 'ms',
      digits: 2,
      values: values((b) => b.post.latencyMs.p50),
    },
    {
      scenario: '',
      metric: 'latency p99',
      unit: 'ms',
      digits: 2,
      values: values((b) => b.post.latencyMs.p99),
    },
    { scenario: '', metric: 'server CPU', unit: '%', values: values((b) => b.post.serverCpuPct) },
    {
      scenario: '',
      metric: 'POST /users ÷ GET /users/:id (median of 3 alternating rounds)',
      digits: 2,
      values: values((b) => b.postVsGet),
      target: { text: '>= 0.3 (SQLite, issue 24)', ok: (v) => v >= 0.3 },
    },
    {
      scenario: `GET /users (${usersLabel} users)`,
      metric: 'time to read the body (median)',
      unit: 's',
      digits: 2,
      values: values((b) => b.list.seconds),
      target: TARGETS.listSeconds,
    },
    {
      scenario: '',
      metric: 'body size',
      unit: 'MB',
      digits: 1,
      values: values((b) => b.list.runs[0].megabytes),
    },
    {
      scenario: '',
      metric: 'server peak RSS growth (max)',
      unit: 'MB',
      digits: 1,
      values: values((b) => b.list.rssGrowthMB),
      target: TARGETS.listRssMB,
    },
  ]);

  const notes = [
    '',
    `Load: ${summary.settings.generator}; GET ${settings.getConnections} and POST ${settings.postConnections} ` +
      `connections, ${settings.durationS} s per scenario after a ${settings.warmupS} s warm-up; ` +
      `list read ${settings.listRuns} time(s); CPUs: ${settings.pinning.describe}. ` +
      `Machine: ${summary.machine.nproc} CPUs, ${summary.machine.cpuModel}, ` +
      `load average ${summary.machine.loadAvg.join(' ')} before the run` +
      (summary.cpuPressureAfter
        ? `, CPU pressure (share of time tasks waited for a CPU) ${summary.cpuPressureAfter.avg60} % over the last minute of the run`
        : '') +
      `. Code: commit ${summary.build.commit}` +
      `${summary.build.srcChanged ? ' with uncommitted changes in src/' : ''}, dist/ built ${summary.build.distBuilt}.`,
  ];
  if (!summary.targets) {
    notes.push('', 'No SQLite figures: the targets (set for SQLite) were not checked.');
  } else if (!summary.targets.comparable) {
    notes.push('', 'Not comparable with the targets: a shortened run (--quick, --duration or --users).');
  }
  for (const e of summary.errors) notes.push('', `${e.backend} FAILED: ${e.message.split('\n')[0]}`);
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n\n${table}\n${notes.join('\n')}\n`);
  if (args.json) writeFileSync(args.json, `${JSON.stringify(summary, null, 2)}\n`);
  if (summary.errors.length > 0) return 1;
  if (args.strict && summary.targets && Object.values(summary.targets).some((t) => t.met === false)) return 1;
  return 0;
}

let code = 1;
try {
  code = await main();
} catch (e) {
  log(`FAILED: ${e instanceof Error ? e.stack : e}`);
} finally {
  await cleanupAll();
}
log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
process.exit(code);
