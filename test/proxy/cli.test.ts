import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
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

interface Proc {
  proc: ChildProcess;
  out: () => string;
  url: Promise<string>;
  exited: Promise<number | null>;
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
      { SVC_PATH_env_AUTH: 'none', SVC_PROXY_LOGLEVEL: 'info' },
    );
    procs.push(p);
    const url = await p.url;
    const st = async (path: string) => (await fetch(`${url}${path}`)).status;
    expect(await st('/fromfile/x')).toBe(200);
    expect(await st('/flag/x')).toBe(200);
    expect(await st('/env/x')).toBe(200);
    expect(await st('/other')).toBe(401);
    // No token: start-up says the proxy cannot authenticate users.
    expect(p.out()).toMatch(/cannot authenticate users/);
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
