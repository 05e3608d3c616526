// Starting and stopping `gatehouse serve` as a child process for benchmarks.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { pinned } from './pin.mjs';

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** stop() of every server started and not yet exited, so an interrupted benchmark can end them. */
export const liveServers = new Set();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Runs `npm run build` when dist/ has no CLI yet. */
export async function ensureBuilt(root, log) {
  if (existsSync(join(root, 'dist/cli/main.js'))) return;
  log('dist/cli/main.js is missing: running npm run build');
  await new Promise((resolve, reject) => {
    // Its output goes to stderr: stdout carries only the results.
    const p = spawn('npm', ['run', 'build'], { cwd: root, stdio: ['ignore', 2, 2] });
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`npm run build exited with ${code}`))));
  });
}

/**
 * Node.js options for every server a benchmark starts, from BENCH_SERVER_NODE_ARGS (split at
 * spaces): how to profile a server under a benchmark's own load, since Node refuses --cpu-prof
 * in NODE_OPTIONS.
 */
function serverNodeArgsFromEnv() {
  return (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
}

const KEY = /^gv[A-Za-z0-9]{54}$/;

/**
 * Starts `node dist/cli/main.js serve` on a new database and a free loopback port, reads the
 * admin API key printed on first start (third line of stdout, indented), and waits until
 * GET /healthz answers. `nodeArgs` go before the script (e.g. a preload), `env` is added to
 * this process's. With `firstStart: false` (a further instance on a database another instance
 * set up) no key is printed and none is waited for: `key` is undefined. `cpus` (a taskset CPU
 * list, bench/lib/pin.mjs) pins the server.
 * Returns { url, key, pid, stderr(), stop() }.
 */
export async function startServer({
  root,
  database,
  logLevel = 'warn',
  timeoutMs = 30_000,
  nodeArgs = [],
  env = {},
  firstStart = true,
  cpus,
}) {
  const port = await freePort();
  const listen = `127.0.0.1:${port}`;
  const child = spawn(
    ...pinned(cpus, process.execPath, [
      ...serverNodeArgsFromEnv(),
      ...nodeArgs,
      join(root, 'dist/cli/main.js'),
      'serve',
      '--database',
      database,
      '--listen',
      listen,
      '--log-level',
      logLevel,
    ]),
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  let out = '';
  let err = '';
  let exited = null;
  child.stdout.setEncoding('utf8').on('data', (d) => {
    out += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d) => {
    // Keep the tail only: a benchmark run must not accumulate unbounded logs.
    err = (err + d).slice(-20_000);
  });
  const exitPromise = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      exited = { code, signal };
      resolve(exited);
    });
  });
  child.on('error', (e) => {
    err += `\nspawn error: ${e.message}`;
  });

  // SIGTERM (graceful shutdown), SIGKILL after 10 s; the same promise for every caller.
  let stopping;
  const stop = () => {
    stopping ??= (async () => {
      if (exited) return exited;
      child.kill('SIGTERM');
      const res = await Promise.race([exitPromise, sleep(10_000).then(() => undefined)]);
      if (res) return res;
      child.kill('SIGKILL');
      return exitPromise;
    })();
    return stopping;
  };
  liveServers.add(stop);
  exitPromise.then(() => liveServers.delete(stop));
  const fail = async (msg) => {
    await stop();
    throw new Error(`${msg}\n--- server stdout ---\n${out}\n--- server stderr ---\n${err}`);
  };

  const deadline = Date.now() + timeoutMs;
  let key;
  while (firstStart && !key) {
    if (exited) await fail(`the server exited early (${JSON.stringify(exited)})`);
    if (Date.now() > deadline) await fail('timed out waiting for the admin key on stdout');
    const lines = out.split('\n');
    // The key line is complete once a newline follows it (two lines may arrive alone).
    if (lines.length > 3) {
      key = lines[2]?.trim();
      if (!KEY.test(key ?? '') || !lines[2]?.startsWith(' ')) {
        await fail(`the third line of stdout is not an indented API key: ${JSON.stringify(lines[2])}`);
      }
    } else await sleep(20);
  }
  const url = `http://${listen}`;
  while (true) {
    if (exited) await fail(`the server exited early (${JSON.stringify(exited)})`);
    if (Date.now() > deadline) await fail('timed out waiting for GET /healthz');
    try {
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  return {
    url,
    key,
    pid: child.pid,
    stderr: () => err,
    exited: () => exited,
    stop,
  };
}
