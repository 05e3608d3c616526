// Password sign-ins as load: each client repeats POST /auth/email, then POST /auth/password with
// the session cookie the first answered, as a browser does. With wrk (a Lua scenario, one
// connection per thread) the load generator costs about a tenth of a millisecond of CPU per
// sign-in; Node's fetch cost 2-3 ms, which on a 2-core machine is CPU the server does not get.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux). */
const HZ = 100;

/** utime + stime (ms) of a thread or process from its /proc stat file; undefined off Linux. */
export function cpuMs(statFile) {
  try {
    const f = readFileSync(statFile, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / HZ;
  } catch {
    return undefined;
  }
}

/** The server process's CPU so far: its main thread (the event loop) and all its threads. */
export const serverCpu = (pid) => ({
  main: cpuMs(`/proc/${pid}/task/${pid}/stat`),
  all: cpuMs(`/proc/${pid}/stat`),
});

const lua = (s) => JSON.stringify(s); // a JSON string literal is a valid Lua string here (ASCII)

/**
 * The wrk scenario. Each sign-in comes from its own client address (X-Forwarded-For, believed from
 * loopback) and a new browser: a device ID of its own in the device cookie, a new session from the
 * e-mail step. (wrk's Lua sees one value per header name, so the device cookie is chosen by the
 * client rather than read back from the first answer; the server takes a well-formed one as is.)
 */
function script({ email, password, threads }) {
  return `
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
-- ok and failed are globals: done() reads them with thread:get.
ok, failed = 0, 0
local step, n, session, device, addr = 0, 0, "", "", ""
local chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
local emailBody = ${lua(`email=${encodeURIComponent(email)}`)}
local passwordBody = ${lua(`password=${encodeURIComponent(password)}`)}
function init(args)
  math.randomseed(tid * 7919 + os.time())
end
local function newDevice()
  local t = {}
  for i = 1, 22 do
    local r = math.random(1, 64)
    t[i] = chars:sub(r, r)
  end
  return table.concat(t)
end
function request()
  local headers = {
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["X-Requested-With"] = "bench",
  }
  if step == 0 then
    n = n + 1
    local i = (n * ${threads} + tid) % 131072
    addr = string.format("198.%d.%d.%d", 18 + math.floor(i / 65536), math.floor(i / 256) % 256, i % 256)
    device = newDevice()
    headers["X-Forwarded-For"] = addr
    headers["Cookie"] = "gatehouse_device=" .. device
    return wrk.format("POST", "/auth/email", headers, emailBody)
  end
  headers["X-Forwarded-For"] = addr
  headers["Cookie"] = "gatehouse_device=" .. device .. "; gatehouse_session=" .. session
  return wrk.format("POST", "/auth/password", headers, passwordBody)
end
function response(status, headers, body)
  if step == 0 then
    local c = headers["set-cookie"] or headers["Set-Cookie"] or ""
    session = c:match("^gatehouse_session=([^;]*)") or ""
    if status == 204 and session ~= "" then
      step = 1
    else
      failed = failed + 1
    end
    return
  end
  step = 0
  if status == 204 then ok = ok + 1 else failed = failed + 1 end
end
function done(summary, latency, requests)
  local okAll, failedAll = 0, 0
  for _, t in ipairs(threads) do
    okAll = okAll + t:get("ok")
    failedAll = failedAll + t:get("failed")
  end
  io.write(string.format('SIGNIN_RESULT {"ok":%d,"failed":%d,"requests":%d,"duration_us":%d,"errors":%d,' ..
    '"p50":%d,"p90":%d,"p99":%d}\\n', okAll, failedAll, summary.requests, summary.duration,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
`;
}

/**
 * Runs `clients` sign-in loops for `durationS` with wrk. Returns { ok, failed, seconds, errors,
 * requestLatencyMs: {p50, p90, p99} (one request, either step), loadCpuMs (wrk's own CPU) }.
 */
export async function wrkSignIns({ url, email, password, clients, durationS }) {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-signin-'));
  try {
    const file = join(dir, 'signin.lua');
    writeFileSync(file, script({ email, password, threads: clients }), { mode: 0o600 });
    // The shell reports wrk's CPU once it has waited for it: cutime + cstime of its own stat.
    const args = ['-c', `wrk "$@"; s=$?; cat /proc/$$/stat; exit $s`, 'sh'];
    args.push(`-t${clients}`, `-c${clients}`, `-d${durationS}s`, '--timeout', '10s', '-s', file, url);
    const out = await new Promise((resolve, reject) => {
      const p = spawn('sh', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => {
        stdout += d;
      });
      p.stderr.on('data', (d) => {
        stderr += d;
      });
      p.on('error', reject);
      p.on('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`wrk: ${code} ${stderr}`))));
    });
    const m = /^SIGNIN_RESULT (.*)$/m.exec(out);
    if (!m) throw new Error(`wrk printed no result: ${out}`);
    const r = JSON.parse(m[1]);
    const stat = out.trim().split('\n').at(-1).split(') ')[1]?.split(' ') ?? [];
    const loadCpuMs = ((Number(stat[13]) + Number(stat[14])) * 1000) / HZ;
    return {
      ok: r.ok,
      failed: r.failed,
      errors: r.errors,
      seconds: r.duration_us / 1e6,
      requestLatencyMs: { p50: r.p50 / 1000, p90: r.p90 / 1000, p99: r.p99 / 1000 },
      loadCpuMs: Number.isFinite(loadCpuMs) ? loadCpuMs : undefined,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
