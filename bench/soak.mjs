#!/usr/bin/env node
// Soak test of `gatehouse serve` (issue 19, "Flat memory"): a steady mixed load at a fixed rate
// for a long time, on SQLite and on PostgreSQL, following the server's memory (RSS from /proc, the
// V8 heap from a preloaded reporter) and the requests' latency and errors. It fails (exit 1) when
// memory grows faster than the stated bound after the warm-up, or when any request fails.
// Usage: node bench/soak.mjs [--duration 600] [--rate 400] [--help]; see docs/benchmarks.md.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { machineInfo } from './lib/machine.mjs';
import { createTempDatabase } from './lib/postgres.mjs';
import { rssKiB, statusKiB } from './lib/proc.mjs';
import { ensureBuilt, liveServers, startServer } from './lib/server.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');

const HELP = `node bench/soak.mjs [options]

Runs \`gatehouse serve\` on a new SQLite database, then on a new PostgreSQL database, under a
steady mixed load (GET /users/:id 50 %, POST /users 20 %, PUT /users/:id 15 %, a list page 10 %,
GET /users/me 5 %, and one event-stream subscriber to User) at a fixed rate, and reports memory,
latency and errors over time.

  --quick               a smoke run: 20 s at 200 requests/s; growth is reported, not judged
  --duration <s>        seconds of load per backend (default 600)
  --rate <n>            requests per second (default 400)
  --warmup <s>          seconds not counted in the growth (default: 40 % of the duration, at most
                        180: SQLite's page caches fill meanwhile)
  --max-growth <MB/min> the bound on RSS and heap growth after the warm-up (default 1)
  --backends <list>     sqlite,postgres (default both)
  --pg-url <url>        PostgreSQL to create the throwaway database next to
                        (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/postgres)
  --help
`;

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    rate: { type: 'string' },
    warmup: { type: 'string' },
    'max-growth': { type: 'string', default: '1' },
    backends: { type: 'string', default: 'sqlite,postgres' },
    'pg-url': {
      type: 'string',
      default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

const DURATION_S = Number(args.duration ?? (args.quick ? 20 : 600));
const RATE = Number(args.rate ?? (args.quick ? 200 : 400));
// SQLite's page caches fill as the database grows (SQLITE_CACHE_KIB in src/store/db.ts): at the
// default rate that takes about two minutes, so the growth is judged after them.
const WARMUP_S =
  args.warmup !== undefined ? Number(args.warmup) : Math.max(5, Math.min(180, DURATION_S * 0.4));
/** Too short to judge growth: --quick only checks that the soak runs and nothing fails. */
const JUDGE_GROWTH = !args.quick;
const MAX_GROWTH = Number(args['max-growth']);
/** Requests in flight at most; above it the load generator is behind and says so. */
const MAX_IN_FLIGHT = 256;
const SEED_USERS = 200;
/**
 * How often the server's heap is read, each time after a full garbage collection
 * (bench/lib/heap-report.mjs). Every 5 s, those pauses made much of the latency tail: on a 2-CPU
 * VM the PostgreSQL p99 was 118 and 134 ms against 58 and 88 ms without them (docs/benchmarks.md).
 */
const HEAP_EVERY_MS = 30_000;
/** Fewer heap readings after the warm-up than this: the heap's growth is reported, not judged. */
const MIN_HEAP_READINGS = 4;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (msg) => process.stderr.write(`[soak] ${msg}\n`);

/** Least-squares slope of y over x. */
function slope(points) {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function soak(backend) {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-soak-'));
  const heapLog = join(dir, 'heap.jsonl');
  let database;
  let pgDb;
  if (backend === 'postgres') {
    pgDb = await createTempDatabase(args['pg-url']);
    database = pgDb.url;
  } else database = join(dir, 'gatehouse.db');
  const server = await startServer({
    root: HERE,
    database,
    nodeArgs: ['--expose-gc', '--import', join(HERE, 'bench/lib/heap-report.mjs')],
    env: { GATEHOUSE_HEAP_LOG: heapLog, GATEHOUSE_HEAP_EVERY_MS: String(HEAP_EVERY_MS) },
  });
  const auth = { authorization: `Bearer ${server.key}` };
  const json = { ...auth, 'content-type': 'application/json' };
  try {
    // Users to read and update, each with its current Etag.
    const users = [];
    for (let i = 0; i < SEED_USERS; i++) {
      const r = await fetch(`${server.url}/users`, { method: 'POST', headers: json, body: '{}' });
      await r.arrayBuffer();
      users.push({ id: r.headers.get('x-id'), etag: r.headers.get('etag') });
    }
    // One subscriber to every User change for the whole run.
    let frames = 0;
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/events`, { headers: auth });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    ws.on('message', () => {
      frames++;
    });
    ws.send(JSON.stringify({ Kind: 'User' }));

    const latencies = [];
    /** The same latencies by kind of request: which of them makes the tail. */
    const byKind = new Map();
    const took = (kind, ms) => {
      latencies.push(ms);
      if (!byKind.has(kind)) byKind.set(kind, []);
      byKind.get(kind).push(ms);
    };
    const errors = new Map();
    let sent = 0;
    let behind = 0;
    let inFlight = 0;
    const fail = (what) => errors.set(what, (errors.get(what) ?? 0) + 1);
    const pick = () => users[Math.floor(Math.random() * users.length)];
    async function one() {
      const roll = Math.random();
      const kind =
        roll < 0.5 ? 'GET' : roll < 0.7 ? 'POST' : roll < 0.85 ? 'PUT' : roll < 0.95 ? 'list' : 'me';
      const t0 = performance.now();
      try {
        let r;
        if (roll < 0.5) r = await fetch(`${server.url}/users/${pick().id}`, { headers: auth });
        else if (roll < 0.7) {
          r = await fetch(`${server.url}/users`, { method: 'POST', headers: json, body: '{}' });
          // The new user replaces a random one among those read and updated: the set stays bounded.
          if (r.status === 201)
            users[Math.floor(Math.random() * users.length)] = {
              id: r.headers.get('x-id'),
              etag: r.headers.get('etag'),
            };
        } else if (roll < 0.85) {
          const u = pick();
          r = await fetch(`${server.url}/users/${u.id}`, {
            method: 'PUT',
            headers: { ...json, 'if-match': u.etag },
            body: JSON.stringify({ Name: { FullName: `soak ${sent}` } }),
          });
          if (r.status === 204) u.etag = r.headers.get('etag');
          // Another writer changed it since (its Etag moved): expected under concurrent updates.
          else if (r.status === 412) {
            await r.arrayBuffer();
            const again = await fetch(`${server.url}/users/${u.id}`, { method: 'HEAD', headers: auth });
            u.etag = again.headers.get('etag');
            took(kind, performance.now() - t0);
            return;
          }
        } else if (roll < 0.95)
          r = await fetch(`${server.url}/users?limit=50&order=Email`, { headers: auth });
        else r = await fetch(`${server.url}/users/me`, { headers: auth });
        await r.arrayBuffer();
        if (r.status >= 400) fail(`${kind} HTTP ${r.status}`);
      } catch (e) {
        fail(`${kind} ${e.cause?.code ?? e.message}`);
      }
      took(kind, performance.now() - t0);
    }

    const samples = [];
    const heapReadings = () => {
      try {
        return readFileSync(heapLog, 'utf8')
          .trimEnd()
          .split('\n')
          .map((l) => JSON.parse(l));
      } catch {
        return [];
      }
    };
    const heapNow = () => heapReadings().at(-1);
    const started = Date.now();
    const sampleEveryMs = Math.max(1_000, Math.min(10_000, (DURATION_S * 1000) / 60));
    let nextSample = started;
    const tickMs = 10;
    /** Requests started or skipped so far: the schedule follows the clock, not the count of
     * ticks, since a timer of 10 ms fires later than that under load (a count of ticks sent
     * 345/s of 400 on a 2-CPU VM). */
    let scheduled = 0;
    log(`${backend}: ${RATE} requests/s for ${DURATION_S} s (warm-up ${WARMUP_S} s)`);
    while (Date.now() - started < DURATION_S * 1000) {
      const due = Math.floor(((Date.now() - started) * RATE) / 1000);
      while (scheduled < due) {
        scheduled++;
        if (inFlight >= MAX_IN_FLIGHT) {
          behind++;
          continue;
        }
        inFlight++;
        sent++;
        void one().finally(() => {
          inFlight--;
        });
      }
      if (Date.now() >= nextSample) {
        const heap = heapNow();
        samples.push({
          s: (Date.now() - started) / 1000,
          rssMB: rssKiB(server.pid) / 1024,
          // Where the resident memory is: anonymous (heaps, native allocations) or mapped files.
          anonMB: statusKiB(server.pid, 'RssAnon') / 1024,
          fileMB: (statusKiB(server.pid, 'RssFile') + statusKiB(server.pid, 'RssShmem')) / 1024,
          walMB: existsSync(`${database}-wal`) ? statSync(`${database}-wal`).size / 2 ** 20 : Number.NaN,
          heapMB: heap ? heap.heapUsed / 2 ** 20 : Number.NaN,
          externalMB: heap ? heap.external / 2 ** 20 : Number.NaN,
        });
        nextSample += sampleEveryMs;
      }
      await sleep(tickMs);
    }
    while (inFlight > 0) await sleep(10);
    ws.close();

    const after = samples.filter((x) => x.s >= WARMUP_S);
    const perMin = (key) => slope(after.map((x) => ({ x: x.s / 60, y: x[key] })));
    latencies.sort((a, b) => a - b);
    const result = {
      backend,
      seconds: (Date.now() - started) / 1000,
      sent,
      behind,
      frames,
      errors: Object.fromEntries(errors),
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      byKind: [...byKind].map(([kind, xs]) => {
        xs.sort((a, b) => a - b);
        return { kind, n: xs.length, p50: percentile(xs, 0.5), p99: percentile(xs, 0.99) };
      }),
      rssGrowth: perMin('rssMB'),
      // From the reporter's own readings (one per HEAP_EVERY_MS), not the samples that repeat them.
      ...(() => {
        const heap = heapReadings().filter((x) => x.t >= started + WARMUP_S * 1000);
        return {
          heapReadings: heap.length,
          heapGrowth: slope(heap.map((x) => ({ x: (x.t - started) / 60_000, y: x.heapUsed / 2 ** 20 }))),
        };
      })(),
      samples,
    };
    return result;
  } finally {
    await server.stop();
    await pgDb?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

async function main() {
  await ensureBuilt(HERE, log);
  const machine = machineInfo();
  const results = [];
  for (const b of args.backends.split(',').filter(Boolean)) results.push(await soak(b));
  const out = [];
  out.push(
    `Soak: ${RATE} requests/s for ${DURATION_S} s per backend, warm-up ${WARMUP_S} s, bound ${MAX_GROWTH} MB/min. Machine: ${machine.nproc} CPUs, ${machine.cpuModel}, Node ${machine.node}, load ${machine.loadAvg.join(' ')}.`,
    '',
  );
  for (const r of results) {
    out.push(
      `### ${r.backend}`,
      '',
      '| time (s) | RSS (MB) | of it anonymous | of it mapped files | heap used (MB) | external (MB) | SQLite WAL (MB) |',
      '|---|---|---|---|---|---|---|',
    );
    const step = Math.max(1, Math.floor(r.samples.length / 12));
    for (let i = 0; i < r.samples.length; i += step) {
      const x = r.samples[i];
      out.push(
        `| ${f(x.s, 0)} | ${f(x.rssMB)} | ${f(x.anonMB)} | ${f(x.fileMB)} | ${f(x.heapMB)} | ${f(x.externalMB)} | ${f(x.walMB)} |`,
      );
    }
    out.push(
      '',
      `${r.sent} requests in ${f(r.seconds, 0)} s (${f(r.sent / r.seconds, 0)}/s; ${r.behind} not sent because ${MAX_IN_FLIGHT} were in flight), ${r.frames} event frames; latency p50 ${f(r.p50, 2)} ms, p99 ${f(r.p99, 2)} ms; errors: ${JSON.stringify(r.errors)}.`,
      `By request (count, p50, p99 in ms): ${r.byKind.map((k) => `${k.kind} ${k.n}, ${f(k.p50, 2)}, ${f(k.p99, 2)}`).join('; ')}.`,
      `Growth after the warm-up (least-squares slope): RSS ${f(r.rssGrowth, 2)} MB/min, heap ${f(r.heapGrowth, 2)} MB/min from ${r.heapReadings} readings${JUDGE_GROWTH ? (r.heapReadings < MIN_HEAP_READINGS ? ' (too few to judge the heap: a longer run reads it more often)' : '') : ' (a --quick run: not judged)'}.`,
      '',
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);
  const failures = results.flatMap((r) => [
    ...(JUDGE_GROWTH && r.rssGrowth > MAX_GROWTH
      ? [`${r.backend}: RSS grows ${f(r.rssGrowth, 2)} MB/min`]
      : []),
    ...(JUDGE_GROWTH && r.heapReadings >= MIN_HEAP_READINGS && r.heapGrowth > MAX_GROWTH
      ? [`${r.backend}: heap grows ${f(r.heapGrowth, 2)} MB/min`]
      : []),
    ...(Object.keys(r.errors).length ? [`${r.backend}: errors ${JSON.stringify(r.errors)}`] : []),
  ]);
  if (failures.length) {
    process.stdout.write(`FAILED: ${failures.join('; ')}\n`);
    process.exitCode = 1;
  }
}

main().catch(async (e) => {
  process.stderr.write(`${e.stack ?? e}\n`);
  for (const stop of liveServers) await stop();
  process.exit(1);
});
