#!/usr/bin/env node
// Benchmark of Gatehouse as OpenID provider (issue 15): client-credentials grants/s and
// refresh-token grants/s, beside Keycloak's published sizing (120/s per vCPU each) as the anchor.
// Usage: node bench/oidc.mjs [--quick] [--duration s] [--connections n] [--backends sqlite,postgres]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { machineInfo } from './lib/machine.mjs';
import { createTempDatabase } from './lib/postgres.mjs';
import { cpuSeconds } from './lib/proc.mjs';
import { ensureBuilt, liveServers, startServer } from './lib/server.mjs';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');
const KEYCLOAK_PER_VCPU = 120;
const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    connections: { type: 'string', default: '16' },
    backends: { type: 'string', default: 'sqlite,postgres' },
    'pg-url': {
      type: 'string',
      default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    },
    'no-build': { type: 'boolean', default: false },
  },
});
const duration = Number(args.duration ?? (args.quick ? 2 : 10)) * 1000;
const conns = Number(args.connections);
const PW = 'benchmark password 1234';
const REDIRECT = 'https://bench.example.com/callback';

async function api(s, method, path, body, headers = {}) {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${s.key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return { res, text };
}

/** A cookie jar over fetch, redirects by hand. */
function jar(base) {
  const cookies = new Map();
  const go = async (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (cookies.size) headers.set('cookie', [...cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(new URL(url, base), { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      if (pair.slice(i + 1) === '') cookies.delete(pair.slice(0, i));
      else cookies.set(pair.slice(0, i), pair.slice(i + 1));
    }
    return res;
  };
  const form = (url, fields, extra = {}) =>
    go(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base, ...extra },
      body: new URLSearchParams(fields),
    });
  return { go, form };
}

async function pkce() {
  const verifier = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return { verifier, challenge: Buffer.from(digest).toString('base64url') };
}

/** One refresh token by the real flow: sign-in, authorization, consent (first time), code exchange. */
async function refreshToken(s, appId, basic, email) {
  const b = jar(s.url);
  const xrw = { 'x-requested-with': 'bench' };
  if ((await b.form('/auth/email', { email }, xrw)).status !== 204) throw new Error('auth/email');
  if ((await b.form('/auth/password', { password: PW }, xrw)).status !== 204)
    throw new Error('auth/password');
  const { verifier, challenge } = await pkce();
  const q = new URLSearchParams({
    client_id: appId,
    response_type: 'code',
    redirect_uri: REDIRECT,
    scope: 'openid email',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 's',
  });
  let res = await b.go(`/oidc/auth?${q}`);
  for (let i = 0; i < 10; i++) {
    const loc = res.headers.get('location');
    if (loc?.startsWith(REDIRECT)) {
      const code = new URL(loc).searchParams.get('code');
      const t = await fetch(`${s.url}/oidc/token`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT,
          code_verifier: verifier,
        }),
      });
      return (await t.json()).refresh_token;
    }
    if (loc) res = await b.go(loc);
    else {
      const html = await res.text();
      const token = /name="token" value="([^"]+)"/.exec(html)?.[1];
      if (!token) throw new Error(`unexpected page: ${html.slice(0, 200)}`);
      const path = new URL(res.url).pathname;
      res = await b.form(`${path}/confirm`, { token, decision: 'allow' });
    }
  }
  throw new Error('the authorization did not come back');
}

/** Runs `conns` loops of `step` for the duration; returns grants/s and server CPU seconds per grant. */
async function load(pid, step, states) {
  let ok = 0;
  let failed = 0;
  const until = Date.now() + duration;
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  await Promise.all(
    states.map(async (st) => {
      while (Date.now() < until) {
        if (await step(st)) ok++;
        else failed++;
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(pid) - cpu0;
  return { perSecond: ok / secs, failed, perCpuSecond: cpu > 0 ? ok / cpu : undefined, cpu };
}

async function run(backend) {
  let database;
  let drop = async () => {};
  let dir;
  if (backend === 'postgres') {
    const db = await createTempDatabase(args['pg-url']);
    database = db.url;
    drop = db.drop;
  } else {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-oidc-'));
    database = join(dir, 'gatehouse.db');
  }
  const s = await startServer({ root: HERE, database });
  try {
    const created = await api(s, 'POST', '/apps', {
      Name: 'bench',
      OIDC: { Enabled: true, RedirectURIs: [REDIRECT], ClientCredentials: true },
    });
    const appId = created.res.headers.get('x-id');
    const secret = JSON.parse((await api(s, 'POST', `/apps/${appId}/oidc/secret`)).text).ClientSecret;
    const basic = `Basic ${Buffer.from(`${appId}:${secret}`).toString('base64')}`;
    const email = `bench-${Date.now()}@example.com`;
    const user = await api(s, 'POST', '/users', { Email: email, Active: true });
    const userId = user.res.headers.get('x-id');
    await api(s, 'PUT', `/auth/enroll/password?user=${userId}`, { Password: PW });

    const post = (body) =>
      fetch(`${s.url}/oidc/token`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
    // Warm-up (first use creates the signing key and builds the provider): not measured.
    for (let i = 0; i < 20; i++) await (await post('grant_type=client_credentials')).arrayBuffer();
    const cc = await load(
      s.pid,
      async () => {
        const r = await post('grant_type=client_credentials');
        await r.arrayBuffer();
        return r.status === 200;
      },
      Array.from({ length: conns }, () => ({})),
    );
    const chains = [];
    for (let i = 0; i < conns; i++) chains.push({ rt: await refreshToken(s, appId, basic, email) });
    const refresh = await load(
      s.pid,
      async (st) => {
        const r = await post(new URLSearchParams({ grant_type: 'refresh_token', refresh_token: st.rt }));
        const j = await r.json();
        if (r.status !== 200) return false;
        st.rt = j.refresh_token;
        return true;
      },
      chains,
    );
    return { backend, cc, refresh };
  } finally {
    await s.stop();
    await drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

if (!args['no-build']) await ensureBuilt(HERE, (l) => process.stderr.write(`${l}\n`));
const m = machineInfo();
process.stdout.write(
  `machine: ${m.nproc} vCPU ${m.cpuModel}, ${m.memTotalGiB} GiB, ${m.node}, load ${m.loadAvg.join(' ')}\n`,
);
process.stdout.write(
  `${duration / 1000} s per scenario, ${conns} concurrent clients; anchor: Keycloak ${KEYCLOAK_PER_VCPU}/s per vCPU\n\n`,
);
process.stdout.write(
  '| backend | grant | grants/s | grants per server CPU-second | failed | vs Keycloak per vCPU |\n|---|---|---|---|---|---|\n',
);
let bad = false;
try {
  for (const backend of args.backends.split(',').filter(Boolean)) {
    const r = await run(backend);
    for (const [name, x] of [
      ['client_credentials', r.cc],
      ['refresh_token', r.refresh],
    ]) {
      const perCore = x.perCpuSecond ?? x.perSecond;
      if (x.failed > 0) bad = true;
      process.stdout.write(
        `| ${backend} | ${name} | ${x.perSecond.toFixed(0)} | ${perCore.toFixed(0)} | ${x.failed} | ${(perCore / KEYCLOAK_PER_VCPU).toFixed(1)}× |\n`,
      );
    }
  }
} finally {
  for (const stop of liveServers) await stop();
}
process.exit(bad ? 1 : 0);
