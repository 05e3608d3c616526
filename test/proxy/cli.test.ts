import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Echo, startEcho } from './harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The CLI compiled from the current src/ (dist/ is left to the build; this is ours alone). */
const OUT = join(ROOT, 'node_modules/.cache/gatehouse-test-proxy-cli');
const CLI = join(OUT, 'cli/main.js');
const dir = mkdtempSync(join(tmpdir(), 'gh-proxy-cli-'));
/** A well-formed proxy token (no service checks it in these tests). */
const TOKEN = `gp.app1.${'A'.repeat(43)}`;

interface Proc {
  proc: ChildProcess;
  out: () => string;
  url: Promise<string>;
  exited: Promise<number | null>;
}

/** GET on a connection of its own (fetch would reuse one, reaching one worker only). */
function getOnNewConnection(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => {
          body += d.toString();
        });
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

function proxy(args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const proc = spawn(process.execPath, [CLI, 'proxy', ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
  });
  let out = '';
  const exited = new Promise<number | null>((r) => proc.on('exit', (c) => r(c)));
  const url = new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no listen line: ${out}`)), 20_000);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = /"url":"([^"]+)"[^\n]*gatehouse proxy listening/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1] as string);
      }
    };
    proc.stdout.on('data', on);
    proc.stderr.on('data', on);
    void exited.then(() => reject(new Error(`exited: ${out}`)));
  });
  url.catch(() => {});
  return { proc, out: () => out, url, exited };
}

describe('gatehouse proxy (the command)', () => {
  let echo: Echo;
  const procs: Proc[] = [];
  beforeAll(async () => {
    const r = spawnSync(
      join(ROOT, 'node_modules/.bin/tsc'),
      ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', OUT],
      {
        encoding: 'utf8',
      },
    );
    if (!existsSync(CLI)) throw new Error(`build failed: ${r.stdout}${r.stderr}`);
    echo = await startEcho();
  }, 180_000);
  afterAll(async () => {
    for (const p of procs) p.proc.kill('SIGKILL');
    await echo?.close();
  });

  it('takes -C, flags, -c and SVC_PATH_ overrides, and reloads its file on SIGHUP', async () => {
    const file = join(dir, 'p.ini');
    writeFileSync(file, `[proxy]\nlisten = 127.0.0.1:1\nauth = required\n[prefix./fromfile/]\nauth = none\n`);
    const p = proxy(
      [
        '-C',
        file,
        '--listen',
        '127.0.0.1:0',
        '--tls',
        'false',
        '--upstream',
        echo.url,
        '-c',
        'path_/flag/_auth=none',
      ],
      {
        SVC_PATH_env_AUTH: 'none',
        SVC_PROXY_LOGLEVEL: 'info',
        SVC_AUTH_TOKEN: TOKEN,
        SVC_AUTH_SERVER: 'http://127.0.0.1:1',
      },
    );
    procs.push(p);
    const url = await p.url;
    const st = async (path: string) => (await fetch(`${url}${path}`)).status;
    expect(await st('/fromfile/x')).toBe(200);
    expect(await st('/flag/x')).toBe(200);
    expect(await st('/env/x')).toBe(200);
    expect(await st('/other')).toBe(401);
    // No service there: start-up says so and goes on (the health check says not ready).
    expect(p.out()).toMatch(/could not register with the service/);
    expect((await fetch(`${url}/.gatehouse/health`)).status).toBe(503);
    writeFileSync(file, `[proxy]\nauth = optional\n`);
    p.proc.kill('SIGHUP');
    for (let i = 0; i < 50 && (await st('/other')) !== 200; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await st('/other')).toBe(200);
    expect(await st('/fromfile/x')).toBe(200); // optional now everywhere
    writeFileSync(file, `[proxy]\nauth = bogus\n`);
    p.proc.kill('SIGHUP');
    for (let i = 0; i < 50 && !/reload refused/.test(p.out()); i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(p.out()).toMatch(/proxy\.auth: expected one of none, optional, required.*reload refused/);
    expect(await st('/other')).toBe(200);
    p.proc.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 60_000);

  it('does not start without a usable auth.token, naming it and never echoing it', async () => {
    for (const [token, why] of [
      [undefined, /auth\.token: is not set/],
      ['gp.nope', /auth\.token: is malformed/],
      [`gp.app1.${'x'.repeat(42)}`, /auth\.token: is malformed/],
    ] as const) {
      const r = spawnSync(process.execPath, [CLI, 'proxy', '--listen', '127.0.0.1:0', '--tls', 'false'], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH, ...(token ? { SVC_AUTH_TOKEN: token } : {}) },
        timeout: 20_000,
      });
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(why);
      if (token) expect(r.stderr + r.stdout).not.toContain(token);
      expect(r.stdout).not.toMatch(/listening/);
    }
  }, 60_000);

  it('runs proxy.workers processes on one listener with the same keys in each', async () => {
    const p = proxy(['--listen', '127.0.0.1:0', '--tls', 'false', '--upstream', echo.url, '--workers', '2'], {
      SVC_AUTH_TOKEN: TOKEN,
      SVC_AUTH_SERVER: 'http://127.0.0.1:1',
      SVC_PROXY_AUTH: 'none',
    });
    procs.push(p);
    const url = await p.url;
    // Both workers listen (one line each), on the one port.
    for (let i = 0; i < 100 && (p.out().match(/gatehouse proxy listening/g) ?? []).length < 2; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect((p.out().match(/gatehouse proxy listening/g) ?? []).length).toBe(2);
    const keySets = new Set<string>();
    for (let i = 0; i < 30; i++) {
      // A new connection each time: the primary hands connections to the workers in turn.
      keySets.add(await getOnNewConnection(`${url}/.gatehouse/jwks.json?${i}`));
    }
    // The generated assertion key (and the cookie key, made the same way) is the same in every worker.
    expect(keySets.size).toBe(1);
    const servedBy = () =>
      new Set(
        p
          .out()
          .split('\n')
          .filter((l) => l.includes('"msg":"request"') && l.includes('"url":"/.gatehouse/jwks.json'))
          .map((l) => (JSON.parse(l) as { pid: number }).pid),
      );
    for (let i = 0; i < 50 && servedBy().size < 2; i++) await new Promise((r) => setTimeout(r, 100));
    expect(servedBy().size).toBe(2);
    p.proc.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 60_000);

  it('stops at start-up on a bad setting, naming the key', async () => {
    for (const [args, env, key] of [
      [['--auth', 'sometimes'], {}, /proxy\.auth \(from --auth\)/],
      [[], { SVC_PROXY_UPSTREAM: 'ftp://x' }, /proxy\.upstream \(from SVC_PROXY_UPSTREAM\)/],
      [['-c', 'path_/x_colour=red'], {}, /-c path_\/x_colour/],
      [[], { SVC_PATH_x_AUTH: 'maybe' }, /SVC_PATH_x_AUTH/],
    ] as const) {
      const r = spawnSync(process.execPath, [CLI, 'proxy', '--listen', '127.0.0.1:0', ...args], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH, ...env },
        timeout: 20_000,
      });
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(key);
    }
  }, 60_000);
});
