#!/usr/bin/env node
// Access proxy benchmark (issue 6, "How we will check"): the same upstream reached directly,
// through nginx as a plain reverse proxy, and through `gatehouse proxy` with an API key and with
// a cookie session, all in one run on this machine. The targets are measured in interleaved rounds
// (the machine's speed drifts by tens of percent within minutes, so each round compares targets
// measured moments apart), with the CPU time each server process spends per request.
// Usage: node bench/proxy.mjs [--quick] [--help]; results go into docs/proxy.md "Benchmark".
// One file of ~770 lines on purpose: a benchmark reads top to bottom (set-up of every target, the
// interleaved rounds, the report); what other benchmarks share lives in bench/lib/.
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { detectTool, runLoad, running, wrkVersion } from './lib/load.mjs';
import { cpuPressure, machineInfo } from './lib/machine.mjs';
import { CLOCK_TICKS, childPids, cpuTicks, endedChildrenCpuTicks, machineCpuTicks } from './lib/proc.mjs';
import { fmt } from './lib/report.mjs';
import { freePort, liveServers, startServer } from './lib/server.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The targets, in their default order; `role` is the process that does the forwarding. */
const TARGETS = [
  { name: 'direct', role: undefined },
  { name: 'nginx', role: 'nginx' },
  { name: 'nginx-log', role: 'nginx-log' },
  { name: 'node-floor', role: 'node-floor' },
  { name: 'net-floor', role: 'net-floor' },
  { name: 'net-work', role: 'net-work' },
  { name: 'proxy-apikey', role: 'proxy' },
  { name: 'proxy-cookie', role: 'proxy' },
  { name: 'proxy-anon', role: 'proxy' },
  { name: 'nginx-authreq', role: 'nginx-authreq' },
];

const HELP = `node bench/proxy.mjs [options]

Builds the CLI (into node_modules/.cache/gatehouse-bench-proxy, leaving dist/ alone), starts a
small upstream, \`gatehouse serve\` (SQLite), \`gatehouse proxy\` (plaintext, with
-c path_/open/_auth=none) and nginx (a plain reverse proxy with upstream keep-alive), then loads
each target:

  direct        GET / on the upstream itself
  nginx         nginx -> upstream (access log off)
  nginx-log     the same with an access log like the proxy's: a JSON line per request, buffered,
                to /dev/null (the like-for-like reference for the proxy's CPU per request)
  node-floor    a bare Node.js forwarder on undici, no authentication (what a forwarder built on
                undici costs; the proxy has its own upstream client, docs/decisions.md)
  net-floor     the least any Node.js forwarder costs: node:net on both sides, bytes relayed,
                only request heads and response ends found (bench/lib/netfloor.mjs); the floor a
                proxy with its own request parser could approach
  net-work      net-floor plus the header work and access-log line every proxied request needs
                (both heads split and written anew, six identity headers): what such a front end
                would still cost, authentication aside
  proxy-apikey  gatehouse proxy (Authorization: Bearer <user key>) -> upstream
  proxy-cookie  gatehouse proxy (signed session cookie from the real sign-in handshake) -> upstream
  proxy-anon    gatehouse proxy, GET /open/ (auth mode none): its forwarding cost alone
  nginx-authreq nginx with the auth_request configuration of docs/proxy.md ("Forward auth") ->
                gatehouse proxy's /.gatehouse/authz/auth-request (Bearer <user key>) -> upstream;
                target: at least 0.35 of nginx alone in req/s

After a warm-up of every target, the measurement runs in rounds. In each round every target is
loaded once at high load (--connections, for requests/s and CPU per request), then once at
moderate load (--moderate connections, for the added median latency); round k starts at target
k mod n, so no target is always first or last. Ratios to nginx and added latencies are taken
within each round (moments apart on the same machine); the verdict uses their median over the
rounds. CPU per request is the utime + stime of each server process (from /proc/<pid>/stat)
around each high-load run divided by the requests served, and likewise for the load generator.

  --quick               1 round of 3 s per run (a smoke test, e.g. npm run bench:smoke)
  --rounds <n>          rounds (default 5; 1 with --quick)
  --duration <s>        seconds per run (default 10; 3 with --quick)
  --targets <list>      comma-separated targets (default all: ${TARGETS.map((t) => t.name).join(',')});
                        ratios need nginx, added latencies need direct
  --connections <n>     connections for the throughput runs (default 64)
  --moderate <n>        connections for the latency runs (default 4)
  --workers <n>         nginx worker_processes and the proxy's proxy.workers, the same (default 1)
  --nginx-workers <n>   the same as --workers (kept for old command lines)
  --proxy-log <level>   the proxy's log level (default info: its access log, one line per
                        request, written to /dev/null; warn leaves it out)
  --proxy-node-args=<s> extra node arguments for the proxy process only (default
                        $BENCH_PROXY_NODE_ARGS), e.g.
                        --proxy-node-args="--cpu-prof --cpu-prof-dir=/tmp/prof" (with "=": a
                        value that starts with a dash is otherwise taken for an option)
  --tool <name>         wrk | autocannon | auto (default auto: wrk when installed)
  --json <file>         also write the JSON summary (with every run's raw figures) there
  --help
`;

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    targets: { type: 'string', default: TARGETS.map((t) => t.name).join(',') },
    connections: { type: 'string', default: '64' },
    moderate: { type: 'string', default: '4' },
    workers: { type: 'string' },
    'nginx-workers': { type: 'string' },
    'proxy-log': { type: 'string', default: 'info' },
    'proxy-node-args': { type: 'string', default: process.env.BENCH_PROXY_NODE_ARGS ?? '' },
    tool: { type: 'string', default: 'auto' },
    json: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

const usage = (msg) => {
  process.stderr.write(`${msg} (see --help)\n`);
  process.exit(2);
};
const positiveInt = (raw, name) => {
  const v = Number(raw);
  if (!Number.isInteger(v) || v <= 0) usage(`--${name} must be a positive whole number`);
  return v;
};
const rounds = positiveInt(args.rounds ?? (args.quick ? '1' : '5'), 'rounds');
const durationS = positiveInt(args.duration ?? (args.quick ? '3' : '10'), 'duration');
const warmupS = args.quick ? 1 : 2;
const connections = positiveInt(args.connections, 'connections');
const moderate = positiveInt(args.moderate, 'moderate');
const workers = positiveInt(args.workers ?? args['nginx-workers'] ?? '1', 'workers');
const tool = args.tool === 'auto' ? detectTool() : args.tool;
if (!['wrk', 'autocannon'].includes(tool)) usage('--tool must be wrk, autocannon or auto');
const wanted = args.targets
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const w of wanted) {
  if (!TARGETS.some((t) => t.name === w)) usage(`--targets: unknown target ${JSON.stringify(w)}`);
}
if (wanted.length === 0) usage('--targets: no target given');
const selected = TARGETS.filter((t) => wanted.includes(t.name));
const has = (name) => selected.some((t) => t.name === name);
const anyProxy = selected.some((t) => t.role === 'proxy' || t.role === 'nginx-authreq');
const log = (m) => process.stderr.write(`[bench:proxy] ${m}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
const work = mkdtempSync(join(tmpdir(), 'gatehouse-bench-proxy-'));

async function cleanup() {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  for (const stop of liveServers) await stop();
  for (const p of running) p.kill?.('SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
process.on('SIGINT', () => void cleanup().then(() => process.exit(130)));

function startChild(cmd, argv, opts = {}) {
  const c = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let err = '';
  c.stderr.on('data', (d) => {
    err = (err + d).slice(-5000);
  });
  c.stdout?.on('data', () => {});
  c.errText = () => err;
  children.push(c);
  return c;
}

async function waitFor(url, check = (r) => r.status < 500, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url, { redirect: 'manual' });
      const body = Buffer.from(await r.arrayBuffer())
        .toString('utf8')
        .slice(0, 200);
      if (check(r)) return;
      last = `last answer ${r.status} ${body}`;
    } catch (e) {
      last = `last error ${e.cause?.code ?? e.message}`; // not yet
    }
    await sleep(50);
  }
  throw new Error(`${url} did not come up (${last})`);
}

/** Compiles src/ with the build tsconfig into a cache directory (dist/ stays as it is). */
function build() {
  const out = join(HERE, 'node_modules/.cache/gatehouse-bench-proxy');
  log(`compiling src/ into ${out}`);
  const r = spawnSync(
    join(HERE, 'node_modules/.bin/tsc'),
    ['-p', join(HERE, 'tsconfig.build.json'), '--outDir', out],
    {
      encoding: 'utf8',
    },
  );
  if (!existsSync(join(out, 'cli/main.js'))) throw new Error(`build failed: ${r.stdout}${r.stderr}`);
  // The service finds the sign-in pages' bundle two levels above its web/ module (src/web/bundle.ts):
  // without it the service warns on stdout before its admin key, which startServer reads.
  const pages = join(out, '../dist/pages');
  if (!existsSync(pages) && existsSync(join(HERE, 'dist/pages'))) {
    mkdirSync(dirname(pages), { recursive: true });
    symlinkSync(join(HERE, 'dist/pages'), pages);
  }
  return out;
}

async function api(service, method, path, body, headers = {}) {
  const r = await fetch(`${service.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${service.key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return { r, json: text ? JSON.parse(text) : undefined };
}

/** The `exp` claim (seconds) of a JWT, read without verifying it. */
function jwtExpiry(jwt) {
  const payload = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8'));
  if (typeof payload.exp !== 'number') throw new Error('the proxy cookie has no exp claim');
  return payload.exp;
}

/** The browser handshake: service session (e-mail + password), proxy redirect, code, cookie. */
async function cookieSession(service, proxyUrl, email, password) {
  const cookies = (r) => r.headers.getSetCookie().map((c) => c.split(';')[0]);
  const e = await fetch(`${service.url}/auth/email`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-requested-with': 'bench' },
    body: new URLSearchParams({ email }),
  });
  let jar = cookies(e);
  const p = await fetch(`${service.url}/auth/password`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-requested-with': 'bench',
      cookie: jar.join('; '),
    },
    body: new URLSearchParams({ password }),
  });
  if (p.status !== 204) throw new Error(`sign-in: ${p.status} ${await p.text()}`);
  const rotated = cookies(p);
  jar = [...jar.filter((c) => !rotated.some((n) => n.split('=')[0] === c.split('=')[0])), ...rotated];
  const first = await fetch(`${proxyUrl}/`, { headers: { accept: 'text/html' }, redirect: 'manual' });
  const state = cookies(first);
  const at = await fetch(first.headers.get('location'), {
    headers: { cookie: jar.join('; ') },
    redirect: 'manual',
  });
  const back = await fetch(at.headers.get('location'), {
    headers: { cookie: state.join('; ') },
    redirect: 'manual',
  });
  const mine = cookies(back).find((c) => c.startsWith('gatehouse_proxy='));
  if (!mine) throw new Error(`no proxy cookie: ${back.status} ${await back.text()}`);
  return mine;
}

const median = (xs) => {
  const v = xs.filter((x) => typeof x === 'number' && !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};
const defined = (xs) => xs.filter((x) => typeof x === 'number' && !Number.isNaN(x));
const minOf = (xs) => (defined(xs).length ? Math.min(...defined(xs)) : undefined);
const maxOf = (xs) => (defined(xs).length ? Math.max(...defined(xs)) : undefined);
const round = (x, digits) => (x === undefined ? undefined : Math.round(x * 10 ** digits) / 10 ** digits);
const ticksToUs = (t) => (t * 1e6) / CLOCK_TICKS;

/**
 * CPU used so far: per role (server process or group of processes) and per PID in clock ticks,
 * the load generator (wrk: our ended children's time; autocannon: this process) in µs, the whole
 * machine's ticks and the kernel's cumulative CPU stall time.
 */
function cpuSnapshot(roles) {
  const procs = {};
  for (const [name, pids] of Object.entries(roles)) {
    procs[name] = {};
    for (const pid of pids()) {
      const t = cpuTicks(pid);
      if (t !== undefined) procs[name][pid] = t;
    }
  }
  let loadgenUs;
  if (tool === 'wrk') {
    const t = endedChildrenCpuTicks();
    loadgenUs = t === undefined ? undefined : ticksToUs(t);
  } else {
    const u = process.cpuUsage();
    loadgenUs = u.user + u.system;
  }
  return {
    at: performance.now(),
    procs,
    loadgenUs,
    machine: machineCpuTicks(),
    stallUs: cpuPressure()?.totalUs,
  };
}

/**
 * What happened between two snapshots around one load run that served `requests` requests:
 * CPU µs per request of every role and of the load generator, and how busy the machine was.
 * A process started in between counts from zero; one that ended in between is lost.
 */
function cpuBetween(a, b, requests) {
  const wallUs = (b.at - a.at) * 1000;
  const cpuUs = {};
  for (const [name, after] of Object.entries(b.procs)) {
    let ticks = 0;
    for (const [pid, t] of Object.entries(after)) ticks += t - (a.procs[name]?.[pid] ?? 0);
    cpuUs[name] = ticksToUs(ticks);
  }
  if (a.loadgenUs !== undefined && b.loadgenUs !== undefined) cpuUs.loadgen = b.loadgenUs - a.loadgenUs;
  const usPerRequest = {};
  for (const [name, us] of Object.entries(cpuUs))
    usPerRequest[name] = requests > 0 ? round(us / requests, 1) : undefined;
  let machine;
  if (a.machine && b.machine && b.machine.total > a.machine.total) {
    const total = b.machine.total - a.machine.total;
    const pct = (ticks) => round((ticks / total) * 100, 1);
    const ownTicks = (Object.values(cpuUs).reduce((s, us) => s + us, 0) * CLOCK_TICKS) / 1e6;
    machine = {
      // Shares of all CPUs together (100 % = every core busy for the whole run).
      busyPct: pct(b.machine.busy - a.machine.busy),
      ownPct: pct(ownTicks),
      stealPct: pct(b.machine.steal - a.machine.steal),
      // For information only: softirq work done in a process's context (much of the loopback
      // network) is also in that process's stime, so this overlaps ownPct.
      softirqPct: pct(b.machine.softirq - a.machine.softirq),
    };
    // Busy time neither charged to the processes we measure nor stolen: other tasks on the machine
    // and kernel work outside our processes (roughly: tick sampling makes it a little uncertain).
    machine.otherPct = round(machine.busyPct - machine.ownPct - machine.stealPct, 1);
  }
  const stallPct =
    a.stallUs !== undefined && b.stallUs !== undefined && wallUs > 0
      ? round(((b.stallUs - a.stallUs) / wallUs) * 100, 1)
      : undefined;
  return {
    wallS: round(wallUs / 1e6, 2),
    cpuMs: Object.fromEntries(Object.entries(cpuUs).map(([k, us]) => [k, round(us / 1000, 1)])),
    usPerRequest,
    machine,
    cpuPressurePct: stallPct,
  };
}

/** The targets in round k's order: starting at target k mod n. */
const rotated = (list, k) => [...list.slice(k % list.length), ...list.slice(0, k % list.length)];

async function main() {
  const machine = machineInfo();
  const root = build();

  // 1. The upstream: a minimal keep-alive HTTP server in its own process.
  const upPort = await freePort();
  const up = startChild(process.execPath, [
    '-e',
    `require('http').createServer((q,s)=>{s.writeHead(200,{'content-type':'text/plain','content-length':'12'});s.end('hello world\\n')}).listen(${upPort},'127.0.0.1')`,
  ]);
  const upstream = `http://127.0.0.1:${upPort}`;
  await waitFor(upstream);
  // The processes whose CPU time is measured around every run (functions: nginx's workers may change).
  const roles = { upstream: () => [up.pid] };
  let proxyPortForAuth;
  let authReqPort;
  let apiKey;
  const targetUrls = { direct: { url: `${upstream}/`, headers: {} } };

  if (anyProxy) {
    // 2. The service, a user with a key and a password, an App with a proxy token.
    const svc = await startServerFrom(root);
    roles.service = () => [svc.pid];
    const email = 'bench@example.com';
    const password = 'a long benchmark password 42';
    const user = await api(svc, 'POST', '/users', {
      Email: email,
      UserName: 'bench',
      Name: { FullName: 'Bench User' },
      Active: true,
    });
    const userId = user.r.headers.get('x-id');
    await api(svc, 'PUT', `/auth/enroll/password?user=${userId}`, { Password: password });
    const key = (await api(svc, 'POST', '/apikeys', { Scopes: ['user'], UserID: userId })).json.Secret;
    const proxyPort = await freePort();
    const proxyUrl = `http://127.0.0.1:${proxyPort}`;
    // nginx's auth_request front (target nginx-authreq) is another origin of the same App: forward
    // auth answers only for origins the App is served on (docs/proxy.md).
    authReqPort = await freePort();
    const app = await api(svc, 'POST', '/apps', {
      Name: 'bench',
      URL: proxyUrl,
      AllowedOrigins: [`http://127.0.0.1:${authReqPort}`],
    });
    const appId = app.r.headers.get('x-id');
    const token = (await api(svc, 'POST', `/apps/${appId}/proxytoken`)).json.Token;

    // 3. gatehouse proxy; /open/ needs no authentication (the proxy-anon target), the rest the
    // default mode (required). The same settings whichever targets run, so figures compare.
    const proxy = startChild(
      process.execPath,
      [
        // e.g. --proxy-node-args="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the proxy only
        ...args['proxy-node-args'].split(' ').filter(Boolean),
        join(root, 'cli/main.js'),
        'proxy',
        '--listen',
        `127.0.0.1:${proxyPort}`,
        '--tls',
        'false',
        '--upstream',
        upstream,
        '--token',
        token,
        '--auth-server',
        svc.url,
        '-c',
        'path_/open/_auth=none',
        '--workers',
        String(workers),
      ],
      {
        env: {
          ...process.env,
          SVC_PROXY_LOGLEVEL: args['proxy-log'],
        },
        // The access log goes nowhere, as nginx's does (but is still made and written).
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    await waitFor(proxyUrl, (r) => r.status === 401).catch((e) => {
      throw new Error(`${e.message}: ${proxy.errText()}`);
    });
    // With workers, the primary and its workers (looked up again before every run).
    roles.proxy = () => [proxy.pid, ...childPids(proxy.pid)];
    proxyPortForAuth = proxyPort;
    if (has('proxy-cookie')) {
      // The proxy's cookie is a signed proof valid for 5 minutes (COOKIE_TTL_S). A browser takes
      // the renewed cookie the proxy sends once it has expired; wrk does not, and would keep sending
      // the expired one, which the proxy then re-verifies, re-validates and re-signs on every
      // request (hundreds of µs each). So before each run, a cookie that would expire during it is
      // replaced by a new one from the same handshake.
      const target = { url: `${proxyUrl}/`, headers: {}, cookieRenewals: 0 };
      let expires = 0;
      target.prepare = async (seconds) => {
        if (expires - Date.now() / 1000 > seconds + 10) return;
        const cookie = await cookieSession(svc, proxyUrl, email, password);
        target.headers.cookie = cookie;
        expires = jwtExpiry(cookie.slice(cookie.indexOf('=') + 1));
        target.cookieRenewals++;
      };
      await target.prepare(0);
      targetUrls['proxy-cookie'] = target;
    }
    targetUrls['proxy-apikey'] = { url: `${proxyUrl}/`, headers: { authorization: `Bearer ${key}` } };
    apiKey = key;
    targetUrls['proxy-anon'] = { url: `${proxyUrl}/open/`, headers: {} };
  }

  // 4. nginx as a plain reverse proxy; nginx-log the same with an access log like the proxy's
  // (one JSON line per request, buffered, to /dev/null), the like-for-like reference.
  let nginxVersion;
  for (const name of ['nginx', 'nginx-log']) {
    if (!has(name)) continue;
    const nginxPort = await freePort();
    const prefix = join(work, name);
    mkdirSync(join(prefix, 'logs'), { recursive: true });
    writeFileSync(
      join(prefix, 'nginx.conf'),
      `worker_processes ${workers};
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 4096; }
http {
  ${
    name === 'nginx-log'
      ? `log_format json escape=json '{"time":"$msec","reqId":"$request_id","method":"$request_method","host":"$host","url":"$request_uri","status":$status,"user":"$remote_user","upstream":"$upstream_addr","ms":$request_time}';
  access_log /dev/null json buffer=8k flush=1s;`
      : 'access_log off;'
  }
  client_body_temp_path ${prefix}/body; proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fcgi; uwsgi_temp_path ${prefix}/uwsgi; scgi_temp_path ${prefix}/scgi;
  upstream app { server 127.0.0.1:${upPort}; keepalive 128; }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $remote_addr;
    }
  }
}
`,
    );
    const nginxBin = existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx';
    // Without nginx there is no ratio to give: say so at once (spawning it would crash on ENOENT).
    if (spawnSync(nginxBin, ['-v']).error)
      throw new Error(
        'nginx is not installed (apt-get install -y nginx; .ci/run installs it), or leave it out with --targets',
      );
    const nginx = startChild(nginxBin, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;']);
    await waitFor(`http://127.0.0.1:${nginxPort}/`).catch((e) => {
      throw new Error(`${e.message}: ${nginx.errText()} (is nginx installed? apt-get install -y nginx)`);
    });
    nginxVersion = spawnSync(nginxBin, ['-v'], { encoding: 'utf8' }).stderr.trim();
    // The master (this child, "daemon off") and its workers, looked up again before every run.
    roles[name] = () => [nginx.pid, ...childPids(nginx.pid)];
    const found = childPids(nginx.pid).length;
    if (found !== workers) log(`warning: found ${found} nginx worker(s), expected ${workers}`);
    targetUrls[name] = { url: `http://127.0.0.1:${nginxPort}/`, headers: {} };
  }

  // 4b. nginx in front of the application with auth_request to gatehouse proxy: the configuration
  // of docs/proxy.md as written there, addresses replaced, at the same worker count.
  if (has('nginx-authreq')) {
    const port = authReqPort;
    const prefix = join(work, 'nginx-authreq');
    mkdirSync(join(prefix, 'logs'), { recursive: true });
    const doc = readFileSync(join(HERE, 'docs/proxy.md'), 'utf8');
    const block = /```[a-z]*\n([\s\S]*?)```/.exec(doc.slice(doc.indexOf('<!-- config:nginx -->')))?.[1];
    if (!block) throw new Error('docs/proxy.md has no nginx forward-auth configuration');
    const server = block
      .replace(/listen 80;/, `listen 127.0.0.1:${port};`)
      .replaceAll('127.0.0.1:9091', `127.0.0.1:${proxyPortForAuth}`)
      .replaceAll('127.0.0.1:8000', `127.0.0.1:${upPort}`);
    writeFileSync(
      join(prefix, 'nginx.conf'),
      `worker_processes ${workers};
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body; proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fcgi; uwsgi_temp_path ${prefix}/uwsgi; scgi_temp_path ${prefix}/scgi;
${server}
}
`,
    );
    const nginxBin = existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx';
    const ng = startChild(nginxBin, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;']);
    await waitFor(`http://127.0.0.1:${port}/`, (r) => r.status === 401).catch((e) => {
      throw new Error(`${e.message}: ${ng.errText()}`);
    });
    roles['nginx-authreq'] = () => [ng.pid, ...childPids(ng.pid)];
    targetUrls['nginx-authreq'] = {
      url: `http://127.0.0.1:${port}/`,
      headers: { authorization: `Bearer ${apiKey}` },
    };
  }

  // 5. For reference: the least a forwarder built on undici does (dispatch, no authentication, no
  // header work): what the proxy cost before it got its own upstream client.
  if (has('node-floor')) {
    const barePort = await freePort();
    const floor = startChild(process.execPath, [
      '--input-type=module',
      '-e',
      `import http from 'node:http'; import { Agent } from ${JSON.stringify(join(HERE, 'node_modules/undici/index.js'))};
const agent = new Agent({ keepAliveTimeout: 30000, connections: 256 });
http.createServer((req, res) => {
  const headers = {}; for (const k in req.headers) if (k !== 'connection') headers[k] = req.headers[k];
  agent.dispatch({ origin: ${JSON.stringify(upstream)}, path: req.url, method: req.method, headers, body: null }, {
    onRequestStart() {},
    onResponseStart(c, status, h) { const o = {}; for (const k in h) if (k !== 'connection' && k !== 'keep-alive') o[k] = h[k]; res.writeHead(status, o); },
    onResponseData(c, chunk) { res.write(chunk); },
    onResponseEnd() { res.end(); },
    onResponseError() { res.destroy(); },
  });
}).listen(${barePort}, '127.0.0.1');`,
    ]);
    await waitFor(`http://127.0.0.1:${barePort}/`);
    roles['node-floor'] = () => [floor.pid];
    targetUrls['node-floor'] = { url: `http://127.0.0.1:${barePort}/`, headers: {} };
  }

  // 6. For reference: node:net on both sides, no HTTP library at all (bench/lib/netfloor.mjs).
  for (const name of ['net-floor', 'net-work']) {
    if (!has(name)) continue;
    const netPort = await freePort();
    const args = [join(HERE, 'bench/lib/netfloor.mjs'), String(netPort), String(upPort)];
    const child = startChild(process.execPath, name === 'net-work' ? [...args, 'work'] : args);
    await waitFor(`http://127.0.0.1:${netPort}/`);
    roles[name] = () => [child.pid];
    targetUrls[name] = { url: `http://127.0.0.1:${netPort}/`, headers: {} };
  }

  const targets = selected.map((t) => Object.assign(targetUrls[t.name], t));
  // Sanity: every target answers 200 (the proxy ones as the user; proxy-anon without credentials).
  for (const t of targets) {
    const r = await fetch(t.url, { headers: t.headers });
    if (r.status !== 200) throw new Error(`${t.name}: ${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  }

  const load = async (t, conns, seconds) => {
    const threads = conns >= connections ? 2 : 1;
    await t.prepare?.(seconds);
    const before = cpuSnapshot(roles);
    const r = await runLoad({
      tool,
      url: t.url,
      headers: t.headers,
      connections: conns,
      durationS: seconds,
      threads,
    });
    return { ...r, connections: conns, cpu: cpuBetween(before, cpuSnapshot(roles), r.requests) };
  };

  // Warm-up (connection pools at full size, JIT, caches), not measured.
  for (const t of targets) {
    log(`${t.name}: warm-up ${warmupS} s at ${connections} connections`);
    await load(t, connections, warmupS);
  }
  const roundsData = [];
  for (let k = 0; k < rounds; k++) {
    const order = rotated(targets, k);
    const r = { round: k + 1, order: order.map((t) => t.name), high: {}, moderate: {} };
    for (const t of order) {
      log(`round ${k + 1}/${rounds}: ${t.name}, ${connections} connections, ${durationS} s`);
      r.high[t.name] = await load(t, connections, durationS);
    }
    for (const t of order) {
      log(`round ${k + 1}/${rounds}: ${t.name}, ${moderate} connections, ${durationS} s`);
      r.moderate[t.name] = await load(t, moderate, durationS);
    }
    roundsData.push(r);
  }

  // Per target: medians over the rounds of the figures and of the within-round comparisons.
  const results = {};
  for (const t of targets) {
    const high = roundsData.map((r) => r.high[t.name]);
    const mod = roundsData.map((r) => r.moderate[t.name]);
    const ratios = has('nginx') ? roundsData.map((r) => r.high[t.name].rps / r.high.nginx.rps) : [];
    const added = has('direct')
      ? roundsData.map((r) => round(r.moderate[t.name].latencyMs.p50 - r.moderate.direct.latencyMs.p50, 3))
      : [];
    const perReq = (role) => (role ? median(high.map((h) => h.cpu.usPerRequest[role])) : undefined);
    // The forwarder's CPU per request in units of the upstream's in the same run: the upstream is
    // the same simple server in every run, so this cancels most of the machine's drift (CPU µs/req
    // of every process moves together by tens of percent between rounds; this by a few percent).
    const vsUp = t.role
      ? high.map((h) => {
          const u = h.cpu.usPerRequest;
          return u[t.role] !== undefined && u.upstream > 0 ? round(u[t.role] / u.upstream, 2) : undefined;
        })
      : [];
    results[t.name] = {
      url: t.url.replace(/:\d+/, ':<port>'),
      forwarder: t.role,
      rps: median(high.map((h) => h.rps)),
      rpsRange: [minOf(high.map((h) => h.rps)), maxOf(high.map((h) => h.rps))],
      ratioToNginx: has('nginx')
        ? {
            median: round(median(ratios), 3),
            min: round(minOf(ratios), 3),
            max: round(maxOf(ratios), 3),
            perRound: ratios.map((x) => round(x, 3)),
          }
        : undefined,
      moderateRps: median(mod.map((m) => m.rps)),
      p50Ms: median(mod.map((m) => m.latencyMs.p50)),
      p99Ms: median(mod.map((m) => m.latencyMs.p99)),
      addedP50Ms: has('direct')
        ? { median: round(median(added), 3), min: minOf(added), max: maxOf(added), perRound: added }
        : undefined,
      forwarderCpuVsUpstream: t.role
        ? { median: round(median(vsUp), 2), min: minOf(vsUp), max: maxOf(vsUp), perRound: vsUp }
        : undefined,
      cpuUsPerRequest: {
        forwarder: perReq(t.role),
        upstream: perReq('upstream'),
        service: perReq(roles.service ? 'service' : undefined),
        loadgen: perReq('loadgen'),
      },
      cookieRenewals: t.cookieRenewals,
      errors: [...high, ...mod].reduce((s, x) => s + x.errors, 0),
      non2xx: [...high, ...mod].reduce((s, x) => s + x.non2xx, 0),
    };
  }

  const range = (m, lo, hi, digits) =>
    rounds > 1 ? `${fmt(m, digits)} [${fmt(lo, digits)}–${fmt(hi, digits)}]` : fmt(m, digits);
  const rows = Object.entries(results).map(([name, r]) => {
    const c = r.cpuUsPerRequest;
    const cells = [
      name,
      fmt(r.rps),
      r.ratioToNginx ? range(r.ratioToNginx.median, r.ratioToNginx.min, r.ratioToNginx.max, 2) : 'n/a',
      fmt(r.p50Ms, 2),
      r.addedP50Ms ? range(r.addedP50Ms.median, r.addedP50Ms.min, r.addedP50Ms.max, 2) : 'n/a',
      fmt(r.p99Ms, 2),
      r.forwarder ? fmt(c.forwarder, 1) : '–',
      fmt(c.upstream, 1),
      r.forwarderCpuVsUpstream
        ? range(
            r.forwarderCpuVsUpstream.median,
            r.forwarderCpuVsUpstream.min,
            r.forwarderCpuVsUpstream.max,
            2,
          )
        : '–',
      fmt(c.loadgen, 1),
      `${r.errors} / ${r.non2xx}`,
    ];
    return `| ${cells.join(' | ')} |`;
  });
  const loadgenName = tool === 'wrk' ? 'wrk' : 'autocannon';
  const perRounds = rounds > 1 ? ' [min–max]' : '';
  const head = [
    'Target',
    `req/s at ${connections} conns`,
    `ratio to nginx${perRounds}`,
    `median ms at ${moderate} conns`,
    `added median ms vs direct${perRounds}`,
    `p99 ms at ${moderate} conns`,
    'CPU µs/req: forwarder',
    'upstream',
    `forwarder ÷ upstream CPU${perRounds}`,
    loadgenName,
    'errors / non-2xx',
  ];
  const table = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows].join('\n');

  const verdict = (name) => {
    const r = results[name];
    const parts = [];
    if (r.ratioToNginx) {
      const q = r.ratioToNginx;
      const metIn = q.perRound.filter((x) => x >= 0.5).length;
      const agreement =
        rounds === 1
          ? ''
          : metIn === rounds
            ? ', met in every round'
            : metIn === 0
              ? ', missed in every round'
              : `, met in ${metIn} of ${rounds} rounds: not conclusive`;
      parts.push(
        `${fmt(q.median, 2)} of nginx's req/s${rounds > 1 ? ` (rounds ${fmt(q.min, 2)}–${fmt(q.max, 2)})` : ''} (target >= 0.5: ${q.median >= 0.5 ? 'met' : 'MISSED'}${agreement})`,
      );
    } else parts.push("no ratio to nginx's req/s (nginx not among --targets)");
    if (r.addedP50Ms) {
      const a = r.addedP50Ms;
      parts.push(
        `+${fmt(a.median, 2)} ms median vs direct${rounds > 1 ? ` (rounds ${fmt(a.min, 2)}–${fmt(a.max, 2)})` : ''} (target < 1 ms: ${a.median < 1 ? 'met' : 'MISSED'})`,
      );
    } else parts.push('no added latency (direct not among --targets)');
    const own = r.forwarderCpuVsUpstream?.median;
    const ng = results.nginx?.forwarderCpuVsUpstream?.median;
    if (own !== undefined) {
      parts.push(
        `CPU per request in the proxy process${workers > 1 ? 'es' : ''} ${fmt(own, 2)}× the upstream's${ng ? `, nginx's ${fmt(ng, 2)}× (so ${fmt(own / ng, 2)}× nginx's cost; target <= 1.5: ${own / ng <= 1.5 ? 'met' : 'MISSED'})` : ''}`,
      );
      // The like-for-like figure beside the target's: nginx with an access log, as the proxy has.
      const ngLog = results['nginx-log']?.forwarderCpuVsUpstream?.median;
      if (ngLog)
        parts.push(`${fmt(own / ngLog, 2)}× the cost of nginx with its access log (${fmt(ngLog, 2)}×)`);
    }
    return `- ${name}: ${parts.join('; ')}`;
  };
  const verdicts = ['proxy-apikey', 'proxy-cookie'].filter(has).map(verdict);
  if (has('nginx-authreq') && results['nginx-authreq'].ratioToNginx) {
    const q = results['nginx-authreq'].ratioToNginx;
    const metIn = q.perRound.filter((x) => x >= 0.35).length;
    const gh = median(roundsData.map((r) => r.high['nginx-authreq'].cpu.usPerRequest.proxy));
    verdicts.push(
      `- nginx-authreq: ${fmt(q.median, 2)} of nginx alone in req/s${rounds > 1 ? ` (rounds ${fmt(q.min, 2)}–${fmt(q.max, 2)}, met in ${metIn} of ${rounds})` : ''} (target >= 0.35: ${q.median >= 0.35 ? 'met' : 'MISSED'}); gatehouse proxy ${fmt(gh, 1)} CPU µs per auth subrequest, nginx ${fmt(results['nginx-authreq'].cpuUsPerRequest.forwarder, 1)} µs per request`,
    );
  }

  // Where the proxy's CPU goes: forwarding alone (proxy-anon vs node-floor), authentication on top.
  const cpuOf = (name) => results[name]?.forwarderCpuVsUpstream?.median;
  const breakdown = [];
  if (cpuOf('proxy-anon') !== undefined && cpuOf('node-floor') !== undefined) {
    breakdown.push(
      `forwarding without authentication (proxy-anon) ${fmt(cpuOf('proxy-anon'), 2)} vs the bare undici forwarder's ${fmt(cpuOf('node-floor'), 2)}`,
    );
  }
  if (cpuOf('net-floor') !== undefined) {
    breakdown.push(`the node:net floor (bytes relayed, no HTTP library) ${fmt(cpuOf('net-floor'), 2)}`);
  }
  if (cpuOf('net-work') !== undefined) {
    breakdown.push(`node:net with the heads rewritten and an access-log line ${fmt(cpuOf('net-work'), 2)}`);
  }
  for (const name of ['proxy-apikey', 'proxy-cookie']) {
    if (cpuOf(name) !== undefined && cpuOf('proxy-anon') !== undefined) {
      breakdown.push(`${name} ${fmt(cpuOf(name), 2)} (authentication included)`);
    }
  }
  const serviceMax = maxOf(
    Object.values(results)
      .filter((r) => r.forwarder === 'proxy')
      .map((r) => r.cpuUsPerRequest.service),
  );

  // How busy the machine was during the high-load runs, and with what.
  const highRuns = roundsData.flatMap((r) => Object.values(r.high));
  const mach = (f) => median(highRuns.map((h) => (h.cpu.machine ? f(h.cpu.machine) : undefined)));
  const after = machineInfo();
  const summary = {
    benchmark: 'gatehouse access proxy (bench/proxy.mjs)',
    date: new Date().toISOString(),
    tool: tool === 'wrk' ? (wrkVersion() ?? 'wrk') : 'autocannon',
    nginx: nginxVersion ? `${nginxVersion}, worker_processes ${workers}` : undefined,
    proxyWorkers: workers,
    proxyLogLevel: args['proxy-log'],
    settings: {
      rounds,
      durationS,
      warmupS,
      connections,
      moderate,
      targets: targets.map((t) => t.name),
      proxyNodeArgs: args['proxy-node-args'] || undefined,
      clockTicks: CLOCK_TICKS,
    },
    machine,
    loadAvgAfter: after.loadAvg,
    cpuPressureAfter: after.cpuPressure,
    duringHighLoad: {
      busyPct: mach((m) => m.busyPct),
      ownPct: mach((m) => m.ownPct),
      stealPct: mach((m) => m.stealPct),
      otherPct: mach((m) => m.otherPct),
      cpuPressurePct: median(highRuns.map((h) => h.cpu.cpuPressurePct)),
    },
    results,
    rounds: roundsData,
  };
  const d = summary.duringHighLoad;
  const runs =
    rounds > 1
      ? `${rounds} interleaved rounds (each target at ${connections} connections, then each at ${moderate}; the starting target rotates), ${durationS} s per run after a ${warmupS} s warm-up`
      : `1 round, ${durationS} s per run after a ${warmupS} s warm-up`;
  const reading =
    rounds > 1
      ? `Figures are medians over the ${rounds} rounds; ratios and added latencies are computed within each round (target vs nginx, target vs direct, measured close together in time), [min–max] is their range over the rounds.`
      : 'One round only: ratios and latencies from single runs, so expect them to vary by tens of percent between runs.';
  const paragraphs = [
    `## Proxy benchmark (${summary.date})`,
    `Machine: ${machine.nproc} CPUs (${machine.cpuModel}), ${machine.memTotalGiB} GiB, ${machine.os}, Node ${machine.node}; load ${machine.loadAvg.join(' ')} at start, ${after.loadAvg.join(' ')} at the end.\nLoad tool: ${summary.tool}; ${runs}; ${summary.nginx ?? 'no nginx'}; gatehouse proxy with proxy.workers ${workers} and log level ${args['proxy-log']}${args['proxy-log'] === 'info' ? ' (its access log, to /dev/null)' : ''}; everything on this one machine.`,
    `${reading} CPU µs/req: user + system CPU time of a process during a ${connections}-connection run ÷ the requests served (clock ${CLOCK_TICKS} ticks/s); the forwarder is nginx (master + ${workers} worker${workers > 1 ? 's' : ''}), the node-floor, net-floor or net-work process or the gatehouse proxy process. "Forwarder ÷ upstream CPU" divides the forwarder's CPU per request by the upstream's in the same run: the CPU cost of every process drifts by tens of percent with the machine, together, so this ratio is the steadiest figure here.${
      results['proxy-cookie']
        ? ` proxy-cookie: the proxy's signed cookie lasts 5 minutes and wrk ignores renewals, so a new one is obtained through the sign-in handshake before any run it would not outlast (cookies obtained: ${results['proxy-cookie'].cookieRenewals}).`
        : ''
    }`,
    `During the ${connections}-connection runs (medians) the machine was ${fmt(d.busyPct)} % busy (share of all ${machine.nproc} CPUs): ${fmt(d.ownPct)} % the processes above and ${loadgenName}, ${fmt(d.stealPct)} % stolen by the hypervisor, ${fmt(d.otherPct === undefined ? undefined : Math.max(0, d.otherPct))} % everything else (other tasks on the machine, kernel work outside these processes); CPU pressure (share of the time some task waited for a CPU) ${fmt(d.cpuPressurePct)} %.`,
    table,
    [
      ...verdicts,
      ...(breakdown.length
        ? [`- CPU per request in the proxy process, in units of the upstream's: ${breakdown.join('; ')}.`]
        : []),
      ...(serviceMax !== undefined
        ? [
            `- gatehouse serve used at most ${fmt(serviceMax, 1)} CPU µs/req during the proxy runs (API keys and cookies are checked from the proxy's caches).`,
          ]
        : []),
    ].join('\n'),
  ].filter(Boolean);
  process.stdout.write(`\n${paragraphs.join('\n\n')}\n`);
  if (args.json) writeFileSync(args.json, `${JSON.stringify(summary, null, 2)}\n`);
}

/** startServer wants a checkout root holding dist/cli/main.js: give it one pointing at our build. */
async function startServerFrom(buildDir) {
  const fakeRoot = join(work, 'root');
  mkdirSync(fakeRoot, { recursive: true });
  symlinkSync(buildDir, join(fakeRoot, 'dist'));
  return startServer({ root: fakeRoot, database: join(work, 'gh.db') });
}

main()
  .then(cleanup)
  .catch(async (e) => {
    process.stderr.write(`bench:proxy failed: ${e.stack ?? e}\n`);
    await cleanup();
    process.exit(1);
  });
