import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../proxy/harness.js';

/*
 * `gatehouse proxy` is a program of its own: it must not load the service's framework, database
 * layer or drivers, nor any of the service's code. This runs the built CLI (npm test builds it
 * before vitest) under a recorder of every loaded module, makes the proxy do real work (a request
 * authenticated with an API key over the back channel, one refused), and reads the list.
 * The same recorder on `gatehouse serve` shows those modules, so the check can fail.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/cli/main.js');
const RECORDER = fileURLToPath(new URL('./record-modules.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gh-modules-'));

/** The service's heavy dependencies, as they appear in a module path. */
const SERVICE_PACKAGES = ['fastify', 'kysely', 'better-sqlite3', 'pg'];
/** Folders of dist/ that belong to the service, not to the proxy. */
const SERVICE_FOLDERS = [
  'store',
  'schema',
  'objects',
  'auth',
  'groups',
  'events',
  'metrics',
  'backchannel',
  'api',
  'web',
  'service',
];

function run(
  args: string[],
  log: string,
  env: NodeJS.ProcessEnv,
): { proc: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const proc = spawn(process.execPath, ['--import', RECORDER, CLI, ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, GATEHOUSE_MODULE_LOG: log, ...env },
  });
  let out = '';
  const collect = (d: Buffer) => {
    out += d.toString();
  };
  proc.stdout?.on('data', collect);
  proc.stderr?.on('data', collect);
  const exited = new Promise<number | null>((r) => proc.on('exit', (c) => r(c)));
  return { proc, out: () => out, exited };
}

async function until(what: string, check: () => RegExpExecArray | null, out: () => string) {
  for (let i = 0; i < 300; i++) {
    const m = check();
    if (m) return m;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not happen: ${out()}`);
}

const loaded = (log: string) =>
  readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
const packagesIn = (mods: string[]) =>
  SERVICE_PACKAGES.filter((p) => mods.some((m) => m.includes(`/node_modules/${p}/`)));
const serviceCodeIn = (mods: string[]) =>
  mods.filter((m) => SERVICE_FOLDERS.some((f) => m.includes(`/dist/${f}/`)));

describe('the proxy is its own program', () => {
  let world: World;
  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build (npm test does)`);
    world = await startWorld('sqlite');
  }, 60_000);
  afterAll(async () => {
    await world?.close();
  });

  it('gatehouse proxy loads none of Fastify, Kysely, better-sqlite3, pg or the service code', async () => {
    const log = join(dir, 'proxy.log');
    const p = run(['proxy', '--listen', '127.0.0.1:0', '--tls', 'false', '--upstream', world.echo.url], log, {
      SVC_AUTH_SERVER: world.serviceUrl,
      SVC_AUTH_TOKEN: world.token,
    });
    try {
      const m = await until(
        'the proxy listening',
        () => /"url":"([^"]+)"[^\n]*gatehouse proxy listening/.exec(p.out()),
        p.out,
      );
      const url = m[1] as string;
      // Real work: a user's API key checked over the back channel and forwarded; no credentials refused.
      const ok = await fetch(`${url}/hello`, { headers: { authorization: `Bearer ${world.userKey}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('/hello');
      expect((await fetch(`${url}/hello`)).status).not.toBe(200);
    } finally {
      p.proc.kill('SIGTERM');
      await p.exited;
    }
    const mods = loaded(log);
    // The recorder worked: it saw the proxy's own modules and the CLI's dependencies.
    expect(mods.some((m) => m.includes('/dist/proxy/server.js'))).toBe(true);
    expect(mods.some((m) => m.includes('/node_modules/commander/'))).toBe(true);
    expect(packagesIn(mods)).toEqual([]);
    expect(serviceCodeIn(mods)).toEqual([]);
  }, 60_000);

  it('the recorder sees them when the service runs (so the check above can fail)', async () => {
    const log = join(dir, 'serve.log');
    const s = run(['serve', '--listen', '127.0.0.1:0', '--database', join(dir, 'serve.db')], log, {});
    try {
      await until('the service listening', () => /"msg":"gatehouse listening"/.exec(s.out()), s.out);
    } finally {
      s.proc.kill('SIGTERM');
      await s.exited;
    }
    const mods = loaded(log);
    expect(packagesIn(mods)).toEqual(SERVICE_PACKAGES);
    expect(serviceCodeIn(mods).length).toBeGreaterThan(20);
  }, 60_000);
});
