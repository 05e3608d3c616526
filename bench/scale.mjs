#!/usr/bin/env node
// Write capacity side by side (issue 24): POST /users {} on one SQLite instance, one PostgreSQL
// instance, and two PostgreSQL instances on the same database, in one run, in alternating rounds
// so that a machine shared with others loads each alike. Reports the ratios the goals are set on.
// Usage: node bench/scale.mjs [--quick] [--rounds 3] [--duration 8] [--connections 16] [--json f]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { detectTool, runLoad, running } from './lib/load.mjs';
import { machineInfo } from './lib/machine.mjs';
import { createTempDatabase } from './lib/postgres.mjs';
import { ensureBuilt, liveServers, startServer } from './lib/server.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    connections: { type: 'string', default: '16' },
    'pg-url': {
      type: 'string',
      default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    },
    json: { type: 'string' },
    root: { type: 'string', default: HERE },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(`node bench/scale.mjs [--quick] [--rounds <n>] [--duration <s>] [--connections <n>] [--json <file>]

Starts \`gatehouse serve\` on a new SQLite database, and two on one new PostgreSQL database, then
measures POST /users {} (wrk) in rounds: SQLite; PostgreSQL through one instance; PostgreSQL
through both at once (the connections split between them). Reports the median of each over the
rounds and the ratios PostgreSQL one instance ÷ SQLite (goal >= 0.5) and two instances ÷ one
(goal >= 1.0). --root <dir> serves another checkout's dist/ (e.g. main, to compare a change).
`);
  process.exit(0);
}
const ROOT = args.root;
const rounds = Number(args.rounds ?? (args.quick ? 1 : 3));
const durationS = Number(args.duration ?? (args.quick ? 2 : 8));
const connections = Number(args.connections);
const tool = detectTool();
const started = performance.now();
const log = (m) =>
  process.stderr.write(`[scale ${((performance.now() - started) / 1000).toFixed(1)}s] ${m}\n`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const undo = [];
async function cleanup() {
  for (const p of running) p.kill('SIGKILL');
  await Promise.all([...liveServers].map((stop) => stop()));
  for (const u of undo.reverse()) await u().catch(() => {});
}

/** POST /users {} against each server at once, `connections` split between them; req/s summed. */
async function writeLoad(servers, key, seconds) {
  const each = Math.max(1, Math.floor(connections / servers.length));
  const results = await Promise.all(
    servers.map((s) =>
      runLoad({
        tool,
        connections: each,
        threads: 1,
        durationS: seconds,
        url: `${s.url}/users`,
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: '{}',
      }),
    ),
  );
  const bad = results.reduce((n, r) => n + r.errors + r.non2xx, 0);
  if (bad > 0) throw new Error(`${bad} errors or error statuses`);
  return {
    rps: results.reduce((n, r) => n + r.rps, 0),
    p99: Math.max(...results.map((r) => r.latencyMs.p99)),
  };
}

async function main() {
  await ensureBuilt(ROOT, log);
  const machine = machineInfo();
  log(`machine: ${machine.nproc} CPUs, load ${machine.loadAvg.join(' ')}`);
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-scale-'));
  undo.push(async () => rmSync(dir, { recursive: true, force: true }));
  const pgdb = await createTempDatabase(args['pg-url']);
  undo.push(() => pgdb.drop());
  const sqlite = await startServer({ root: ROOT, database: join(dir, 'gatehouse.db') });
  const pg1 = await startServer({ root: ROOT, database: pgdb.url });
  const pg2 = await startServer({ root: ROOT, database: pgdb.url, firstStart: false });
  const runs = { sqlite: [], pgOne: [], pgTwo: [] };
  const scenarios = [
    ['sqlite', 'SQLite, one instance', [sqlite], sqlite.key],
    ['pgOne', 'PostgreSQL, one instance', [pg1], pg1.key],
    ['pgTwo', 'PostgreSQL, two instances on one database', [pg1, pg2], pg1.key],
  ];
  for (const [, label, servers, key] of scenarios) {
    log(`${label}: warm-up`);
    await writeLoad(servers, key, args.quick ? 1 : 2);
  }
  for (let r = 0; r < rounds; r++) {
    for (const [name, label, servers, key] of scenarios) {
      const res = await writeLoad(servers, key, durationS);
      runs[name].push(res);
      log(`round ${r + 1}: ${label}: ${res.rps} writes/s, p99 ${res.p99} ms`);
    }
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v.map((x) => x.rps))]));
  const ratio = (a, b) => Math.round((a / b) * 100) / 100;
  const summary = {
    machine: { nproc: machine.nproc, cpuModel: machine.cpuModel, loadAvgBefore: machine.loadAvg },
    loadAvgAfter: machineInfo().loadAvg,
    settings: { rounds, durationS, connections, tool, root: ROOT },
    runs,
    median: m,
    pgOneVsSqlite: ratio(m.pgOne, m.sqlite),
    pgTwoVsOne: ratio(m.pgTwo, m.pgOne),
  };
  const rows = [
    '| POST /users {} | writes/s (median of rounds) | rounds |',
    '|---|---|---|',
    `| SQLite, one instance | ${m.sqlite} | ${runs.sqlite.map((x) => x.rps).join(', ')} |`,
    `| PostgreSQL, one instance | ${m.pgOne} | ${runs.pgOne.map((x) => x.rps).join(', ')} |`,
    `| PostgreSQL, two instances, one database | ${m.pgTwo} | ${runs.pgTwo.map((x) => x.rps).join(', ')} |`,
    '',
    `PostgreSQL one instance ÷ SQLite: **${summary.pgOneVsSqlite}** (goal >= 0.5 ${summary.pgOneVsSqlite >= 0.5 ? 'met' : 'NOT met'}); ` +
      `two instances ÷ one: **${summary.pgTwoVsOne}** (goal >= 1.0 ${summary.pgTwoVsOne >= 1 ? 'met' : 'NOT met'}).`,
    `${connections} connections in all (${tool}), ${durationS} s a run, ${rounds} round(s). Machine: ${machine.nproc} CPUs, ` +
      `${machine.cpuModel}, load average ${machine.loadAvg.join(' ')} before and ${summary.loadAvgAfter.join(' ')} after.`,
  ];
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n\n${rows.join('\n')}\n`);
  if (args.json) writeFileSync(args.json, `${JSON.stringify(summary, null, 2)}\n`);
}

let code = 0;
try {
  await main();
} catch (e) {
  log(`FAILED: ${e instanceof Error ? e.stack : e}`);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
