#!/usr/bin/env node
// Sign-in benchmark (issue 4): password sign-ins per second through the form endpoints
// (POST /auth/email + POST /auth/password, as a browser does), and the argon2id cost behind them;
// then passkey sign-ins (issue 18: POST /auth/u2f/start + /auth/u2f/finish, no e-mail step and no
// password) and where their time goes.
// Usage: node bench/signin.mjs [--duration 10] [--connections 4] [--no-build] [--json file]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { detectTool } from './lib/load.mjs';
import { machineInfo } from './lib/machine.mjs';
import { startServer } from './lib/server.mjs';
import { serverCpu, wrkSignIns } from './lib/signinload.mjs';
import { SoftKey } from './lib/softkey.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '4' },
    'no-build': { type: 'boolean', default: false },
    json: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (opt.help) {
  console.log(`node bench/signin.mjs [--duration <s>] [--connections <n>] [--no-build] [--json <file>]

Builds dist/ (unless --no-build), starts \`gatehouse serve\` on a new SQLite database, creates a
user with a password, then, after a warm-up of twice <duration> (at most 20 s), for <duration>
seconds in rounds of about 2 s <connections> clients each repeat a full sign-in: POST /auth/email,
then POST /auth/password with the session cookie (204 each). The clients are wrk (a Lua scenario;
Node's fetch where wrk is not installed). Before each round and after the last, for 1 s, the
argon2id limit: the better of verifications/s with one per CPU and with <connections> at once,
in this process; each round is set against the limits either side of it.
Reports the server's CPU per sign-in (event loop, all threads) and the load generator's.
Then, for as long again, each client repeats a passkey sign-in with a key of its own (a software
authenticator): POST /auth/u2f/start, sign, POST /auth/u2f/finish (200).
Reports sign-ins per second, latency percentiles, the argon2id parameters and cost, and for
passkeys the time of each step and of the signature check alone.`);
  process.exit(0);
}
const DURATION_MS = Number(opt.duration) * 1000;
const CONNECTIONS = Number(opt.connections);
const log = (m) => process.stderr.write(`${m}\n`);

async function build() {
  log('npm run build');
  await new Promise((resolve, reject) => {
    const p = spawn('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    p.on('error', reject);
    p.on('exit', (c) => (c === 0 ? resolve() : reject(new Error(`npm run build exited with ${c}`))));
  });
}

const cookieOf = (res) =>
  (res.headers.getSetCookie?.() ?? [])
    .map((c) => c.split(';')[0])
    .filter((c) => !c.endsWith('='))
    .join('; ');

/**
 * Each sign-in comes from its own client address, as many users behind a trusted proxy: one
 * address would soon meet the per-address limit on e-mail lookups (docs/signin.md), which is
 * not what this measures.
 */
let clients = 0;
const nextClient = () => {
  const i = clients++ % 65536;
  return `198.18.${i >> 8}.${i & 255}`;
};

async function form(url, fields, cookie, client) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-requested-with': 'bench' };
  if (cookie) headers.cookie = cookie;
  if (client) headers['x-forwarded-for'] = client;
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(fields).toString() });
  await res.arrayBuffer();
  return res;
}

const RP_ORIGIN = 'https://id.bench.example';
const median = (xs) => {
  const a = [...xs].sort((x, y) => x - y);
  return a.length ? a[Math.floor(a.length / 2)] : NaN;
};
const round1 = (x) => Math.round(x * 10) / 10;
/** The p-th percentile of ascending `sorted`; NaN when it is empty. */
const percentile = (sorted, p) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;
const round2 = (x) => Math.round(x * 100) / 100;

async function json(url, body, cookie, client) {
  const headers = { 'content-type': 'application/json', 'x-requested-with': 'bench' };
  if (cookie) headers.cookie = cookie;
  if (client) headers['x-forwarded-for'] = client;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { res, body: await res.text() };
}

/** A user with a password and a passkey (registered in a password session, as on the settings page). */
async function passkeyUser(server, admin, n, PW) {
  const email = `passkey${n}@example.com`;
  const u = await fetch(`${server.url}/users`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ Email: email, Active: true }),
  });
  const id = u.headers.get('x-id');
  await fetch(`${server.url}/auth/enroll/password?user=${id}`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ Password: PW }),
  });
  const client = nextClient();
  const e = await form(`${server.url}/auth/email`, { email }, undefined, client);
  const cookie = cookieOf(e);
  const p = await form(`${server.url}/auth/password`, { password: PW }, cookie, client);
  // The password step rotated the session token: its new cookie replaces the first one.
  const jar = new Map(
    [...cookie.split('; '), ...cookieOf(p).split('; ')].filter(Boolean).map((c) => c.split('=')),
  );
  const session = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const key = new SoftKey(new URL(RP_ORIGIN).hostname, RP_ORIGIN);
  const start = await json(`${server.url}/auth/enroll/u2f`, {}, session, client);
  if (start.res.status !== 200) throw new Error(`passkey registration: ${start.res.status} ${start.body}`);
  const conf = await json(
    `${server.url}/auth/enroll/u2f/confirm`,
    { Credential: key.create(JSON.parse(start.body)), Name: 'bench' },
    session,
    client,
  );
  if (conf.res.status !== 200) throw new Error(`passkey confirmation: ${conf.res.status} ${conf.body}`);
  return { key, handle: Buffer.from(id).toString('base64url') };
}

/** The library's assertion check alone (what /auth/u2f/finish spends on cryptography), in process. */
async function verifyCost() {
  const { verifyAuthenticationResponse } = await import('@simplewebauthn/server');
  const key = new SoftKey('id.bench.example', RP_ORIGIN);
  const challenge = Buffer.from('bench challenge 0123456789').toString('base64url');
  const times = [];
  for (let i = 0; i < 50; i++) {
    const response = key.get({ challenge }, undefined);
    const t = performance.now();
    await verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: RP_ORIGIN,
      expectedRPID: 'id.bench.example',
      credential: { id: response.id, publicKey: new Uint8Array(key.cose), counter: key.counter - 1 },
      requireUserVerification: false,
    });
    times.push(performance.now() - t);
  }
  return median(times.slice(10));
}

/**
 * Verifications per second with `concurrency` running at once (on libuv's thread pool), for `ms`.
 */
async function argon2Rate(argon2, hash, password, concurrency, ms) {
  let n = 0;
  const end = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await argon2.verify(hash, password);
        n++;
      }
    }),
  );
  return n / ((performance.now() - started) / 1000);
}

/**
 * The argon2id limit of this machine, now: the better of verifications per second with one per
 * CPU at once and with one per client at once (as many as the service may run at once: one per
 * sign-in in flight, on libuv's pool). Which is better depends on the machine and its load (on
 * an idle 2-CPU machine 4 at once kept both CPUs busier than 2). Measured beside the sign-ins
 * (just before and just after), so a machine shared with others loads both alike.
 * Returns { best, perCpu, perClient }.
 */
async function argon2Limit(argon2, hash, password, clients, ms) {
  const cpus = availableParallelism();
  const perCpu = await argon2Rate(argon2, hash, password, cpus, ms / 2);
  const perClient = clients === cpus ? perCpu : await argon2Rate(argon2, hash, password, clients, ms / 2);
  return { best: Math.max(perCpu, perClient), perCpu, perClient };
}

async function main() {
  if (!opt['no-build']) await build();
  const { ARGON2_OPTIONS } = await import(join(ROOT, 'dist/core/hashing.js'));
  const argon2 = await import('@node-rs/argon2');

  // The cost of one hash and one verification, alone on an otherwise idle event loop.
  const PW = 'benchmark password 1234';
  const h = await argon2.hash(PW, ARGON2_OPTIONS);
  const times = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    await argon2.verify(h, PW);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const verifyMs = times[Math.floor(times.length / 2)];

  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-signin-'));
  process.env.SVC_SERVER_TRUSTPROXY = '127.0.0.1, ::1';
  // WebAuthn's relying party comes from the configured sign-in URL (never the Host header).
  process.env.SVC_SERVER_SIGNINURL = `${RP_ORIGIN}/signin`;
  const server = await startServer({ root: ROOT, database: join(dir, 'bench.db') });
  try {
    const admin = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
    const u = await fetch(`${server.url}/users`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ Email: 'bench@example.com', Active: true }),
    });
    const id = u.headers.get('x-id');
    const set = await fetch(`${server.url}/auth/enroll/password?user=${id}`, {
      method: 'PUT',
      headers: admin,
      body: JSON.stringify({ Password: PW }),
    });
    if (set.status !== 204) throw new Error(`setting the password: ${set.status} ${await set.text()}`);

    const tool = detectTool();
    // Warm-up, not counted. Over a process's first half minute of sign-ins V8 is still compiling
    // the path: at 12-18 s its compiler threads spent 5-6 % of argon2id's CPU and the event loop
    // 22 % (a running service's: under 1 % and 17-19 %, from 30 s on). So the measured rounds
    // start once the process has done 20 s of sign-ins (shorter runs: twice their length).
    const warmUpS = Math.max(1, Math.min(20, (DURATION_MS * 2) / 1000));
    // One sign-in by fetch: the e-mail step, then the password with its cookie; the last answer.
    const fetchSignIn = async () => {
      const client = nextClient();
      const e = await form(`${server.url}/auth/email`, { email: 'bench@example.com' }, undefined, client);
      if (e.status !== 204) return e;
      return form(`${server.url}/auth/password`, { password: PW }, cookieOf(e), client);
    };
    const wrkFor = (durationS) =>
      wrkSignIns({
        url: server.url,
        email: 'bench@example.com',
        password: PW,
        clients: CONNECTIONS,
        durationS,
      });
    /** Sign-ins for `ms` by fetch: { ok, failed, seconds, lat (ms, one per sign-in), loadCpuMs }. */
    const fetchFor = async (ms) => {
      const lat = [];
      let ok = 0;
      let failed = 0;
      const own = process.cpuUsage();
      const end = Date.now() + ms;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (Date.now() < end) {
            const t = performance.now();
            const p = await fetchSignIn();
            if (p.status === 204) {
              ok++;
              lat.push(performance.now() - t);
            } else failed++;
          }
        }),
      );
      const used = process.cpuUsage(own);
      return {
        ok,
        failed,
        seconds: (performance.now() - started) / 1000,
        lat,
        loadCpuMs: (used.user + used.system) / 1000,
      };
    };
    if (tool === 'wrk') await wrkFor(warmUpS);
    else await fetchFor(warmUpS * 1000);

    // The measurement: rounds of sign-ins (2 s each) alternating with the argon2id limit (1 s),
    // limit first and last, so each round is set against the limits just before and after it.
    // This machine's speed drifts by 10 % within seconds (other tenants); a limit measured
    // seconds away from the sign-ins moved the ratio by ±0.07 between runs of one build.
    const rounds = Math.max(1, Math.round(DURATION_MS / 2000));
    const roundMs = DURATION_MS / rounds;
    const limitMs = 1000;
    const limits = [await argon2Limit(argon2, h, PW, CONNECTIONS, limitMs)];
    const perRound = [];
    let ok = 0;
    let failed = 0;
    let seconds = 0;
    let loadCpuMs = 0;
    let cpuMain = 0;
    let cpuAll = 0;
    const allLat = [];
    for (let i = 0; i < rounds; i++) {
      const cpuBefore = serverCpu(server.pid);
      let r;
      if (tool === 'wrk') {
        r = await wrkFor(roundMs / 1000);
        r.failed += r.errors;
      } else {
        r = await fetchFor(roundMs);
        allLat.push(...r.lat);
      }
      const cpuAfter = serverCpu(server.pid);
      limits.push(await argon2Limit(argon2, h, PW, CONNECTIONS, limitMs));
      ok += r.ok;
      failed += r.failed;
      seconds += r.seconds;
      loadCpuMs += r.loadCpuMs;
      cpuMain += cpuAfter.main - cpuBefore.main;
      cpuAll += cpuAfter.all - cpuBefore.all;
      const limit = (limits[i].best + limits[i + 1].best) / 2;
      perRound.push({ signinsPerSecond: r.ok / r.seconds, limit, latency: r.requestLatencyMs });
    }
    let latencyMs;
    if (tool === 'wrk') {
      // wrk times requests, not pairs of them; its percentiles are per run: the median of the rounds'.
      const mid = (k) => median(perRound.map((p) => p.latency[k]));
      latencyMs = {
        of: 'one request (either step), median of the rounds',
        p50: mid('p50'),
        p90: mid('p90'),
        p99: mid('p99'),
      };
    } else {
      allLat.sort((a, b) => a - b);
      const pct = (p) => percentile(allLat, p);
      latencyMs = { of: 'one sign-in (both steps)', p50: pct(50), p90: pct(90), p99: pct(99) };
    }
    const perSignIn = (ms) => (ok > 0 && ms !== undefined && !Number.isNaN(ms) ? round2(ms / ok) : undefined);
    const result = {
      signinsPerSecond: Math.round((ok / seconds) * 10) / 10,
      signins: ok,
      failed,
      seconds: Math.round(seconds * 10) / 10,
      connections: CONNECTIONS,
      rounds,
      warmUpSeconds: warmUpS,
      loadGenerator: tool === 'wrk' ? 'wrk' : 'fetch',
      latencyMs: {
        ...latencyMs,
        p50: round1(latencyMs.p50),
        p90: round1(latencyMs.p90),
        p99: round1(latencyMs.p99),
      },
      // CPU per sign-in: the server's event loop, the server with its argon2id and V8 threads, and
      // the load generator (all on the same cores: what the server does not get).
      cpuMsPerSignIn: {
        serverMainThread: perSignIn(cpuMain),
        serverAllThreads: perSignIn(cpuAll),
        loadGenerator: perSignIn(loadCpuMs),
      },
      argon2id: { ...ARGON2_OPTIONS, verifyMedianMs: Math.round(verifyMs * 10) / 10 },
      // The limit over the run: the mean of the limits the rounds were set against.
      argon2idLimitPerSecond: round1(perRound.reduce((a, p) => a + p.limit, 0) / rounds),
      argon2idLimits: limits.map((l) => round1(l.best)),
      argon2idRatesPerCpuPerClient: [
        round1(limits.reduce((a, l) => a + l.perCpu, 0) / limits.length),
        round1(limits.reduce((a, l) => a + l.perClient, 0) / limits.length),
      ],
      ratioPerRound: perRound.map((p) => round2(p.signinsPerSecond / p.limit)),
      machine: machineInfo(),
    };
    result.ratioToArgon2Limit =
      Math.round((result.signinsPerSecond / result.argon2idLimitPerSecond) * 100) / 100;

    // Passkey sign-ins: each client its own user and key (a key's counter must only go up, so one
    // key is never used by two clients at once).
    const keys = [];
    for (let i = 0; i < CONNECTIONS; i++) keys.push(await passkeyUser(server, admin, i, PW));
    const pk = { ok: 0, failed: 0, statuses: {}, lat: [], start: [], sign: [], finish: [] };
    const pkEnd = Date.now() + DURATION_MS;
    const pkWorker = async (k) => {
      while (Date.now() < pkEnd) {
        const client = nextClient();
        const t0 = performance.now();
        const st = await fetch(`${server.url}/auth/u2f/start`, {
          method: 'POST',
          headers: { 'x-requested-with': 'bench', 'x-forwarded-for': client },
        });
        const options = await st.json();
        const t1 = performance.now();
        const assertion = k.key.get(options, k.handle);
        const t2 = performance.now();
        const f = await json(`${server.url}/auth/u2f/finish`, assertion, cookieOf(st), client);
        const t3 = performance.now();
        pk.statuses[f.res.status] = (pk.statuses[f.res.status] ?? 0) + 1;
        if (f.res.status === 200) {
          pk.ok++;
          pk.lat.push(t3 - t0);
          pk.start.push(t1 - t0);
          pk.sign.push(t2 - t1);
          pk.finish.push(t3 - t2);
        } else pk.failed++;
      }
    };
    const pkStarted = performance.now();
    await Promise.all(keys.map(pkWorker));
    const pkSeconds = (performance.now() - pkStarted) / 1000;
    pk.lat.sort((a, b) => a - b);
    const pkPct = (p) => percentile(pk.lat, p);
    result.passkey = {
      signinsPerSecond: round1(pk.ok / pkSeconds),
      signins: pk.ok,
      failed: pk.failed,
      statuses: pk.statuses,
      seconds: round1(pkSeconds),
      latencyMs: { p50: Math.round(pkPct(50)), p90: Math.round(pkPct(90)), p99: Math.round(pkPct(99)) },
      stepMedianMs: {
        start: round1(median(pk.start)),
        sign: round1(median(pk.sign)),
        finish: round1(median(pk.finish)),
      },
      verifyMedianMs: round1(await verifyCost()),
    };
    const P = result.passkey;
    console.log(`
## Benchmark: password sign-ins (bench/signin.mjs)

| Measure | Value |
|---|---|
| Sign-ins per second (e-mail + password, ${CONNECTIONS} clients, ${result.rounds} rounds, ${result.seconds} s in all, after ${result.warmUpSeconds} s of warm-up) | ${result.signinsPerSecond} |
| Sign-ins completed / failed | ${ok} / ${failed} |
| Latency of ${result.latencyMs.of}, p50 / p90 / p99 | ${result.latencyMs.p50} / ${result.latencyMs.p90} / ${result.latencyMs.p99} ms |
| CPU per sign-in: server event loop / server, all threads (argon2id included) / load generator (${result.loadGenerator}) | ${result.cpuMsPerSignIn.serverMainThread ?? '-'} / ${result.cpuMsPerSignIn.serverAllThreads ?? '-'} / ${result.cpuMsPerSignIn.loadGenerator ?? '-'} ms |
| argon2id parameters | m=${ARGON2_OPTIONS.memoryCost} KiB, t=${ARGON2_OPTIONS.timeCost}, p=${ARGON2_OPTIONS.parallelism} |
| One argon2id verification (median, idle) | ${result.argon2id.verifyMedianMs} ms |
| The argon2id limit: verifications/s, the better of ${availableParallelism()} (one per CPU) and ${CONNECTIONS} (one per client) at once, for 1 s before each round and after the last | ${result.argon2idLimitPerSecond} (${result.argon2idLimits.join(' / ')}; ${availableParallelism()} at once ${result.argon2idRatesPerCpuPerClient[0]}, ${CONNECTIONS} at once ${result.argon2idRatesPerCpuPerClient[1]}) |
| **Sign-ins ÷ the argon2id limit** (goal >= 0.8, issue 24), and each round's against the limits either side of it | **${result.ratioToArgon2Limit}** (${result.ratioPerRound.join(' / ')}) |
| Passkey sign-ins per second (start + finish, no e-mail step, no password, ${CONNECTIONS} clients, ${P.seconds} s) | ${P.signinsPerSecond} |
| Passkey sign-ins completed / failed | ${P.signins} / ${P.failed} |
| Latency of one passkey sign-in p50 / p90 / p99 | ${P.latencyMs.p50} / ${P.latencyMs.p90} / ${P.latencyMs.p99} ms |
| Where it goes (medians): POST /auth/u2f/start / signing (client) / POST /auth/u2f/finish | ${P.stepMedianMs.start} / ${P.stepMedianMs.sign} / ${P.stepMedianMs.finish} ms |
| The assertion check alone (@simplewebauthn/server, ES256, median, idle) | ${P.verifyMedianMs} ms |

Machine: nproc ${result.machine.nproc}, ${result.machine.cpuModel}, ${result.machine.memTotalGiB} GiB, Node ${result.machine.node}, ${result.machine.os}, load average ${result.machine.loadAvg.join(' ')}.
\`free -h\`:
\`\`\`
${result.machine.free}
\`\`\``);
    if (opt.json) writeFileSync(opt.json, JSON.stringify(result, null, 2));
    if (failed > 0 || P.failed > 0) process.exitCode = 1;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
