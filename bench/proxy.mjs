#!/usr/bin/env node
// Access proxy benchmark (issue 6, "How we will check"): the same upstream reached directly,
// through nginx as a plain reverse proxy, and through `gatehouse proxy` with an API key and with
// a cookie session, all in one run on this machine.
// Usage: node bench/proxy.mjs [--quick] [--help]; results go into docs/proxy.md "Benchmark".
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { detectTool, runLoad, running, wrkVersion } from './lib/load.mjs';
import { machineInfo } from './lib/machine.mjs';
import { fmt } from './lib/report.mjs';
import { freePort, liveServers, startServer } from './lib/server.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');

const HELP = `node bench/proxy.mjs [options]

Builds the CLI (into node_modules/.cache/gatehouse-bench-proxy, leaving dist/ alone), starts a
small upstream, \`gatehouse serve\` (SQLite), \`gatehouse proxy\` (plaintext) and nginx (a plain
reverse proxy with upstream keep-alive), then loads GET / on each:

  direct        the upstream itself
  nginx         nginx -> upstream
  node-floor    a bare Node.js forwarder (undici, no authentication): the Node.js ceiling here
  proxy-apikey  gatehouse proxy (Authorization: Bearer <user key>) -> upstream
  proxy-cookie  gatehouse proxy (signed session cookie from the real sign-in handshake) -> upstream

Each target is measured twice: at moderate load (--moderate connections, for the added median
latency) and at high load (--connections, for requests/s).

  --quick               3 s per run
  --duration <s>        seconds per run (default 10)
  --connections <n>     connections for the throughput runs (default 64)
  --moderate <n>        connections for the latency runs (default 4)
  --nginx-workers <n>   nginx worker_processes (default 1: the proxy is one Node.js process)
  --tool <name>         wrk | autocannon | auto (default auto: wrk when installed)
  --json <file>         also write the JSON summary there
  --help
`;

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    connections: { type: 'string', default: '64' },
    moderate: { type: 'string', default: '4' },
    'nginx-workers': { type: 'string', default: '1' },
    tool: { type: 'string', default: 'auto' },
    json: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

const durationS = Number(args.duration ?? (args.quick ? 3 : 10));
const connections = Number(args.connections);
const moderate = Number(args.moderate);
const tool = args.tool === 'auto' ? detectTool() : args.tool;
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
  c.stdout.on('data', () => {});
  c.errText = () => err;
  children.push(c);
  return c;
}

async function waitFor(url, check = (r) => r.status < 500, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url, { redirect: 'manual' });
      await r.arrayBuffer();
      if (check(r)) return;
    } catch {
      // not yet
    }
    await sleep(50);
  }
  throw new Error(`${url} did not come up`);
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

async function main() {
  const machine = machineInfo();
  const root = build();

  // 1. The upstream: a minimal keep-alive HTTP server in its own process.
  const upPort = await freePort();
  startChild(process.execPath, [
    '-e',
    `require('http').createServer((q,s)=>{s.writeHead(200,{'content-type':'text/plain','content-length':'12'});s.end('hello world\\n')}).listen(${upPort},'127.0.0.1')`,
  ]);
  const upstream = `http://127.0.0.1:${upPort}`;
  await waitFor(upstream);

  // 2. The service, a user with a key and a password, an App with a proxy token.
  const svc = await startServerFrom(root);
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
  const app = await api(svc, 'POST', '/apps', { Name: 'bench', URL: proxyUrl });
  const appId = app.r.headers.get('x-id');
  const token = (await api(svc, 'POST', `/apps/${appId}/proxytoken`)).json.Token;

  // 3. gatehouse proxy.
  const proxy = startChild(
    process.execPath,
    [
      // e.g. BENCH_PROXY_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the proxy only
      ...(process.env.BENCH_PROXY_NODE_ARGS ?? '').split(' ').filter(Boolean),
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
    ],
    {
      env: {
        ...process.env,
        SVC_PROXY_LOGLEVEL: 'warn',
      },
    },
  );
  await waitFor(proxyUrl, (r) => r.status === 401).catch((e) => {
    throw new Error(`${e.message}: ${proxy.errText()}`);
  });
  const cookie = await cookieSession(svc, proxyUrl, email, password);

  // 4. nginx as a plain reverse proxy.
  const nginxPort = await freePort();
  const prefix = join(work, 'nginx');
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  const workers = Number(args['nginx-workers']);
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
  const nginx = startChild(nginxBin, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;']);
  await waitFor(`http://127.0.0.1:${nginxPort}/`).catch((e) => {
    throw new Error(`${e.message}: ${nginx.errText()} (is nginx installed? apt-get install -y nginx)`);
  });
  const nginxVersion = spawnSync(nginxBin, ['-v'], { encoding: 'utf8' }).stderr.trim();

  // 5. For reference: the least a Node.js forwarder does (undici dispatch, no authentication, no
  // header work), i.e. the ceiling for any proxy written in Node.js on this machine.
  const barePort = await freePort();
  startChild(process.execPath, [
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

  const targets = [
    { name: 'direct', url: `${upstream}/`, headers: {} },
    { name: 'nginx', url: `http://127.0.0.1:${nginxPort}/`, headers: {} },
    { name: 'node-floor', url: `http://127.0.0.1:${barePort}/`, headers: {} },
    { name: 'proxy-apikey', url: `${proxyUrl}/`, headers: { authorization: `Bearer ${key}` } },
    { name: 'proxy-cookie', url: `${proxyUrl}/`, headers: { cookie } },
  ];
  // Sanity: every target answers 200 (the proxy ones as the user).
  for (const t of targets) {
    const r = await fetch(t.url, { headers: t.headers });
    if (r.status !== 200) throw new Error(`${t.name}: ${r.status} ${await r.text()}`);
  }
  const results = {};
  for (const t of targets) {
    // Warm-up (connection pools, JIT, caches), not measured.
    await runLoad({ tool, url: t.url, headers: t.headers, connections: moderate, durationS: 1 });
    log(`${t.name}: ${moderate} connections, ${durationS} s`);
    const mod = await runLoad({ tool, url: t.url, headers: t.headers, connections: moderate, durationS });
    log(`${t.name}: ${connections} connections, ${durationS} s`);
    const high = await runLoad({ tool, url: t.url, headers: t.headers, connections, durationS, threads: 2 });
    results[t.name] = { moderate: mod, high };
  }
  const d = results.direct;
  const n = results.nginx;
  const rows = [];
  for (const name of Object.keys(results)) {
    const r = results[name];
    rows.push(
      `| ${name} | ${fmt(r.high.rps)} | ${fmt(r.high.rps / n.high.rps, 2)} | ${fmt(r.moderate.rps)} | ${fmt(r.moderate.latencyMs.p50, 2)} | ${fmt(r.moderate.latencyMs.p50 - d.moderate.latencyMs.p50, 2)} | ${fmt(r.moderate.latencyMs.p99, 2)} | ${r.high.errors + r.moderate.errors} / ${r.high.non2xx + r.moderate.non2xx} |`,
    );
  }
  const table = [
    `| Target | req/s at ${connections} conns | ratio to nginx | req/s at ${moderate} conns | median ms at ${moderate} conns | added median ms vs direct | p99 ms at ${moderate} conns | errors / non-2xx |`,
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  const verdict = (name) => {
    const r = results[name];
    const ratio = r.high.rps / n.high.rps;
    const added = r.moderate.latencyMs.p50 - d.moderate.latencyMs.p50;
    return `${name}: ${fmt(ratio, 2)} of nginx's req/s (target >= 0.5: ${ratio >= 0.5 ? 'met' : 'MISSED'}), +${fmt(added, 2)} ms median vs direct (target < 1 ms: ${added < 1 ? 'met' : 'MISSED'})`;
  };
  const summary = {
    date: new Date().toISOString(),
    tool: tool === 'wrk' ? (wrkVersion() ?? 'wrk') : 'autocannon',
    nginx: `${nginxVersion}, worker_processes ${workers}`,
    durationS,
    connections,
    moderate,
    machine,
    results,
  };
  process.stdout.write(
    `\n## Proxy benchmark (${summary.date})\n\nMachine: ${machine.nproc} CPUs (${machine.cpuModel}), ${machine.memTotalGiB} GiB, ${machine.os}, Node ${machine.node}; load ${machine.loadAvg.join(' ')} at start.\nLoad tool: ${summary.tool}; ${durationS} s per run; ${summary.nginx}; everything on this one machine.\n\n${table}\n\n- ${verdict('proxy-apikey')}\n- ${verdict('proxy-cookie')}\n`,
  );
  if (args.json) writeFileSync(args.json, JSON.stringify(summary, null, 2));
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
