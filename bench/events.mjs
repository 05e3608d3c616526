#!/usr/bin/env node
// Event stream benchmark (issue 3, "How we will check"): N websocket subscribers to User on
// `gatehouse serve` over a temporary SQLite database; the time from a PUT's 204 to the last
// subscriber receiving that change's frame, over a series of PUTs. Loopback only, bounded in time.
// Usage: node bench/events.mjs [--subscribers 1000] [--puts 200] [--root <checkout>] [--json <file>]
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { machineInfo } from './lib/machine.mjs';
import { ensureBuilt, startServer } from './lib/server.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '1000' },
    puts: { type: 'string', default: '200' },
    root: { type: 'string', default: HERE },
    json: { type: 'string' },
    'budget-seconds': { type: 'string', default: '110' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(`node bench/events.mjs [options]

Starts \`node dist/cli/main.js serve\` on a new SQLite database (127.0.0.1, a free port), connects
--subscribers websockets to GET /events, each subscribed to {"Kind":"User"}, then updates one user
--puts times, one PUT at a time, and measures for each PUT the time from its 204 response to the
moment the last subscriber has received the frame of that change. Prints p50/p99 as JSON.

  --subscribers <n>      websocket subscribers (default 1000)
  --puts <n>             PUTs measured (default 200)
  --root <dir>           checkout whose dist/ is served (default: this one; run npm run build first)
  --json <file>          also write the JSON summary here
  --budget-seconds <s>   give up after this long (default 110)
`);
  process.exit(0);
}
const SUBSCRIBERS = Number(args.subscribers);
const PUTS = Number(args.puts);
const BUDGET_MS = Number(args['budget-seconds']) * 1000;
const TARGET_P99_MS = 100;
const started = Date.now();
const log = (m) => process.stderr.write(`[bench:events] ${m}\n`);
const overBudget = () => Date.now() - started > BUDGET_MS;

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const round = (x) => Math.round(x * 100) / 100;

async function main() {
  await ensureBuilt(args.root, log);
  if (!existsSync(join(args.root, 'dist/api/events.js'))) {
    throw new Error('dist/ has no event stream: run `npm run build` first');
  }
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-events-'));
  const server = await startServer({ root: args.root, database: join(dir, 'gatehouse.db') });
  serverPid = server.pid;
  const sockets = [];
  try {
    const auth = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
    const created = await fetch(`${server.url}/users`, { method: 'POST', headers: auth, body: '{}' });
    if (created.status !== 201) throw new Error(`POST /users answered ${created.status}`);
    const userId = created.headers.get('x-id');
    let etag = created.headers.get('etag');

    // The service allows a bounded number of streams per user (src/events/hub.ts,
    // maxStreamsPerUser): the subscribers are many users' audit keys, a few streams each, as many
    // dashboards would be.
    const PER_KEY = 25;
    const keys = [];
    for (let i = 0; i < Math.ceil(SUBSCRIBERS / PER_KEY); i++) {
      const u = await fetch(`${server.url}/users`, { method: 'POST', headers: auth, body: '{}' });
      if (u.status !== 201) throw new Error(`POST /users answered ${u.status}`);
      const r = await fetch(`${server.url}/apikeys`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ Scopes: ['audit'], UserID: u.headers.get('x-id'), Name: `bench-events-${i}` }),
      });
      if (r.status !== 201) throw new Error(`POST /apikeys answered ${r.status}`);
      keys.push((await r.json()).Secret);
    }

    // Subscribers. Each records when it saw each version of the user (by FullName).
    const wsUrl = `${server.url.replace(/^http/, 'ws')}/events`;
    const seen = []; // seen[put] = { count, last }
    let caughtUp = 0;
    let opened = 0;
    const connectOne = () =>
      new Promise((resolve, reject) => {
        const key = keys[Math.floor(opened++ / PER_KEY)];
        const ws = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${key}` } });
        let marker = false;
        ws.on('open', () => ws.send('{"Kind":"User"}'));
        ws.on('message', (data) => {
          const f = JSON.parse(String(data));
          if (f.StatusCode !== undefined) return reject(new Error(`error frame: ${f.StatusText}`));
          if (f.ID === '') {
            if (!marker) {
              marker = true;
              caughtUp++;
              resolve(ws);
            }
            return;
          }
          if (!marker || f.ID !== userId) return;
          const m = /^bench-(\d+)$/.exec(f.Item?.Name?.FullName ?? '');
          if (!m) return;
          const s = seen[Number(m[1])];
          if (!s) return;
          s.count++;
          s.last = performance.now();
          if (s.count === SUBSCRIBERS) s.done();
        });
        ws.on('error', reject);
        ws.on('close', (code) => {
          if (!marker) reject(new Error(`closed before catching up (${code})`));
        });
        sockets.push(ws);
      });
    const t0 = performance.now();
    const BATCH = 50;
    for (let i = 0; i < SUBSCRIBERS; i += BATCH) {
      if (overBudget()) throw new Error('over the time budget while connecting');
      await Promise.all(Array.from({ length: Math.min(BATCH, SUBSCRIBERS - i) }, connectOne));
    }
    const connectSeconds = (performance.now() - t0) / 1000;
    log(`${caughtUp} subscribers caught up in ${round(connectSeconds)} s`);

    // PUTs, one at a time; each waits until every subscriber has the frame (or 10 s).
    const fromResponse = [];
    const fromRequest = [];
    let early = 0;
    for (let i = 1; i <= PUTS; i++) {
      if (overBudget()) throw new Error(`over the time budget after ${i - 1} PUTs`);
      let done;
      const all = new Promise((r) => {
        done = r;
      });
      seen[i] = { count: 0, last: 0, done };
      const body = JSON.stringify({ Name: { FullName: `bench-${i}` } });
      const sent = performance.now();
      const res = await fetch(`${server.url}/users/${userId}`, {
        method: 'PUT',
        headers: { ...auth, 'if-match': etag },
        body,
      });
      const got204 = performance.now();
      await res.arrayBuffer();
      if (res.status !== 204) throw new Error(`PUT answered ${res.status}`);
      etag = res.headers.get('etag');
      const timeout = new Promise((_, rej) =>
        setTimeout(
          () => rej(new Error(`PUT ${i}: only ${seen[i].count} of ${SUBSCRIBERS} frames in 10 s`)),
          10_000,
        ),
      );
      await Promise.race([all, timeout]);
      const ms = seen[i].last - got204;
      if (ms < 0) early++;
      fromResponse.push(Math.max(0, ms));
      fromRequest.push(seen[i].last - sent);
      await new Promise((r) => setTimeout(r, 20)); // let the last frames settle between PUTs
    }
    fromResponse.sort((a, b) => a - b);
    fromRequest.sort((a, b) => a - b);
    const summary = {
      benchmark: 'events',
      backend: 'sqlite',
      subscribers: SUBSCRIBERS,
      puts: PUTS,
      connectSeconds: round(connectSeconds),
      lastFrameAfter204Ms: {
        p50: round(pct(fromResponse, 50)),
        p99: round(pct(fromResponse, 99)),
        max: round(fromResponse[fromResponse.length - 1]),
      },
      lastFrameAfterPutSentMs: {
        p50: round(pct(fromRequest, 50)),
        p99: round(pct(fromRequest, 99)),
        max: round(fromRequest[fromRequest.length - 1]),
      },
      putsWhoseLastFrameBeat204: early,
      target: `p99 < ${TARGET_P99_MS} ms`,
      met: pct(fromResponse, 99) < TARGET_P99_MS,
      seconds: round((Date.now() - started) / 1000),
      machine: machineInfo(),
    };
    const text = JSON.stringify(summary, null, 2);
    process.stdout.write(`${text}\n`);
    if (args.json) writeFileSync(args.json, `${text}\n`);
  } finally {
    for (const ws of sockets) ws.terminate();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

let serverPid;
const guard = setTimeout(() => {
  log('time budget exceeded: giving up');
  if (serverPid) process.kill(serverPid, 'SIGKILL');
  process.exit(1);
}, BUDGET_MS + 15_000);
guard.unref();
main().then(
  () => process.exit(0),
  (err) => {
    log(err.stack ?? String(err));
    process.exit(1);
  },
);
