// HTTP load generation with wrk (preferred: a small C program, light on a 2-core machine) or
// autocannon (the dev dependency, used where wrk is not installed). Both report the same shape.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pinned } from './pin.mjs';

/** 'wrk' when it is on the PATH, else 'autocannon'. */
export function detectTool() {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  return r.error ? 'autocannon' : 'wrk';
}

export function wrkVersion() {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  // "wrk debian/4.1.0-3+b2 [epoll] Copyright (C) 2012 Will Glozer": keep the name and version.
  return r.error ? undefined : (r.stdout || r.stderr).trim().split(/\s+/).slice(0, 2).join(' ');
}

const luaString = (s) => JSON.stringify(s); // a JSON string literal is a valid Lua string here (ASCII)

/**
 * Runs one load scenario.
 * opts: { tool, url, method, headers, body, connections, threads, durationS, timeoutS, cpus, paths }
 * (cpus: a taskset CPU list wrk runs on; autocannon runs in this process, unpinned; paths: the
 * requests go to these paths of `url`'s origin in turn, instead of to `url` itself)
 * Returns { tool, requests, durationS, rps, latencyMs: {p50, p90, p99, max, mean}, errors, non2xx }.
 * `errors` counts connection/read/write errors and timeouts; `non2xx` counts error statuses
 * (wrk: status >= 400; autocannon: anything but 2xx).
 */
export async function runLoad(opts) {
  return opts.tool === 'wrk' ? runWrk(opts) : runAutocannon(opts);
}

async function runWrk({
  url,
  method = 'GET',
  headers = {},
  body,
  connections,
  threads = 1,
  durationS,
  timeoutS = 10,
  cpus,
  paths,
}) {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-wrk-'));
  try {
    const script = join(dir, 'scenario.lua');
    const lines = [`wrk.method = ${luaString(method)}`];
    if (body !== undefined) lines.push(`wrk.body = ${luaString(body)}`);
    for (const [k, v] of Object.entries(headers))
      lines.push(`wrk.headers[${luaString(k)}] = ${luaString(v)}`);
    if (paths) {
      lines.push(
        `local paths = {${paths.map(luaString).join(', ')}}`,
        'local next = 0',
        'request = function()',
        '  next = next % #paths + 1',
        '  return wrk.format(nil, paths[next])',
        'end',
      );
    }
    lines.push(
      'done = function(summary, latency, requests)',
      '  local e = summary.errors',
      '  io.write(string.format(\'BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' +
        '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' +
        '"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}\\n\',',
      '    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,',
      '    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))',
      'end',
    );
    // The script holds the API key: readable by us only, removed right after the run.
    writeFileSync(script, `${lines.join('\n')}\n`, { mode: 0o600 });
    const args = [
      `-t${threads}`,
      `-c${connections}`,
      `-d${durationS}s`,
      `--timeout`,
      `${timeoutS}s`,
      '-s',
      script,
      url,
    ];
    const { code, stdout, stderr } = await run(
      ...pinned(cpus, 'wrk', args),
      (durationS + timeoutS + 15) * 1000,
    );
    const m = /^BENCH_RESULT (.*)$/m.exec(stdout);
    if (code !== 0 || !m) throw new Error(`wrk failed (exit ${code}): ${stderr || stdout}`);
    const r = JSON.parse(m[1]);
    const seconds = r.duration_us / 1e6;
    return {
      tool: 'wrk',
      requests: r.requests,
      durationS: round(seconds, 2),
      rps: Math.round(r.requests / seconds),
      latencyMs: {
        p50: round(r.p50 / 1000, 2),
        p90: round(r.p90 / 1000, 2),
        p99: round(r.p99 / 1000, 2),
        max: round(r.max / 1000, 2),
        mean: round(r.mean / 1000, 2),
      },
      errors: r.connect + r.read + r.write + r.timeout,
      non2xx: r.status,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runAutocannon({
  url,
  method = 'GET',
  headers = {},
  body,
  connections,
  durationS,
  timeoutS = 10,
  paths,
}) {
  const { default: autocannon } = await import('autocannon');
  let next = 0;
  const r = await autocannon({
    url,
    method,
    headers,
    body,
    ...(paths && {
      requests: [{ setupRequest: (req) => ({ ...req, path: paths[next++ % paths.length] }) }],
    }),
    connections,
    pipelining: 1,
    duration: durationS,
    timeout: timeoutS,
  });
  const total = r.requests.total ?? Math.round(r.requests.average * r.duration);
  return {
    tool: 'autocannon',
    requests: total,
    durationS: round(r.duration, 2),
    rps: Math.round(total / r.duration),
    latencyMs: {
      p50: r.latency.p50,
      p90: r.latency.p90,
      p99: r.latency.p99,
      max: r.latency.max,
      mean: round(r.latency.mean ?? r.latency.average, 2),
    },
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  };
}

const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Runs a command to completion (killing it after `limitMs`), capturing its output. */
export function run(cmd, args, limitMs) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.setEncoding('utf8').on('data', (d) => {
      stdout += d;
    });
    p.stderr.setEncoding('utf8').on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), limitMs);
    running.add(p);
    p.on('error', (e) => {
      clearTimeout(timer);
      running.delete(p);
      reject(e);
    });
    p.on('close', (code) => {
      clearTimeout(timer);
      running.delete(p);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Child processes of run() still going, so an interrupted benchmark can stop them. */
export const running = new Set();
