/**
 * Real front proxies for the forward-auth tests: nginx and Caddy run as processes with the
 * configurations of docs/proxy.md as written there (only the addresses replaced), so the
 * documentation is what is tested. A missing binary skips with the reason, except under CI=true.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
export const CADDY = ['/usr/bin/caddy', '/usr/local/bin/caddy'].find((p) => existsSync(p));

/** The fenced block after `<!-- config:<name> -->` in docs/proxy.md. */
export function docConfig(name: 'nginx' | 'caddy' | 'traefik'): string {
  const doc = readFileSync(join(ROOT, 'docs/proxy.md'), 'utf8');
  const at = doc.indexOf(`<!-- config:${name} -->`);
  if (at < 0) throw new Error(`docs/proxy.md has no <!-- config:${name} --> block`);
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(doc.slice(at));
  if (!m) throw new Error(`no fenced block after config:${name}`);
  return m[1] as string;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, proc: ChildProcess, out: () => string): Promise<void> {
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`exited with ${proc.exitCode}: ${out()}`);
    const ok = await new Promise<boolean>((r) => {
      const c = net.connect(port, '127.0.0.1');
      c.once('connect', () => {
        c.destroy();
        r(true);
      });
      c.once('error', () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`did not listen on ${port}: ${out()}`);
}

export interface FrontProxy {
  /** http://127.0.0.1:<port>: the application's origin as the browser sees it. */
  url: string;
  port: number;
  logs(): string;
  close(): Promise<void>;
}

function run(bin: string, args: string[], env: NodeJS.ProcessEnv, port: number): Promise<FrontProxy> {
  const proc = spawn(bin, args, {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const collect = (d: Buffer) => {
    out += d.toString();
  };
  proc.stdout?.on('data', collect);
  proc.stderr?.on('data', collect);
  return waitForPort(port, proc, () => out).then(() => ({
    url: `http://127.0.0.1:${port}`,
    port,
    logs: () => out,
    close: () =>
      new Promise<void>((r) => {
        if (proc.exitCode !== null) return r();
        proc.once('exit', () => r());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 3000).unref();
      }),
  }));
}

/** nginx with the documented server block: gatehouse at `gatehouse`, the application at `app`. */
export async function startNginx(
  gatehouse: string,
  app: string,
  serverBlock = docConfig('nginx'),
): Promise<FrontProxy> {
  if (!NGINX) throw new Error('nginx is not installed');
  const dir = mkdtempSync(join(tmpdir(), 'gh-nginx-'));
  const port = await freePort();
  const server = serverBlock
    .replace(/listen 80;/, `listen 127.0.0.1:${port};`)
    .replaceAll('127.0.0.1:9091', gatehouse)
    .replaceAll('127.0.0.1:8000', app);
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${server}
}
`,
  );
  const p = await run(
    NGINX,
    ['-p', dir, '-e', `${dir}/error.log`, '-c', conf, '-g', 'daemon off;'],
    {},
    port,
  );
  return { ...p, logs: () => p.logs() + readIf(join(dir, 'error.log')) };
}

function readIf(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/** Caddy with the documented site block, plaintext on a local port. */
export async function startCaddy(
  gatehouse: string,
  app: string,
  site = docConfig('caddy'),
): Promise<FrontProxy> {
  if (!CADDY) throw new Error('caddy is not installed');
  const dir = mkdtempSync(join(tmpdir(), 'gh-caddy-'));
  const port = await freePort();
  const body = site
    .replace(/^app\.example\.com \{/m, `http://127.0.0.1:${port} {`)
    .replaceAll('127.0.0.1:9091', gatehouse)
    .replaceAll('127.0.0.1:8000', app);
  const file = join(dir, 'Caddyfile');
  writeFileSync(file, `{\n  admin off\n  auto_https off\n}\n${body}`);
  return run(
    CADDY,
    ['run', '--config', file, '--adapter', 'caddyfile'],
    { HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
    port,
  );
}

/** Skips (locally) or fails (CI=true) when a front proxy is missing. */
export function missing(name: string, bin: string | undefined): boolean {
  if (bin) return false;
  if (process.env.CI === 'true') throw new Error(`${name} is required under CI=true (.ci/run installs it)`);
  console.warn(`skipping the ${name} forward-auth tests: ${name} is not installed`);
  return true;
}

/** A browser over real HTTP: follows nothing by itself, keeps cookies per origin. */
export class Jar {
  readonly byOrigin = new Map<string, Map<string, string>>();
  set(origin: string, name: string, value: string) {
    const m = this.byOrigin.get(origin) ?? new Map<string, string>();
    if (value === '') m.delete(name);
    else m.set(name, value);
    this.byOrigin.set(origin, m);
  }
  async get(url: string, headers: Record<string, string> = {}) {
    const origin = new URL(url).origin;
    const jar = this.byOrigin.get(origin);
    const h: Record<string, string> = { accept: 'text/html', ...headers };
    if (jar?.size) h.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { headers: h, redirect: 'manual' });
    const setCookies = res.headers.getSetCookie();
    for (const c of setCookies) {
      const [pair] = c.split(';');
      const i = (pair ?? '').indexOf('=');
      this.set(origin, (pair ?? '').slice(0, i), /Max-Age=0(;|$)/.test(c) ? '' : (pair ?? '').slice(i + 1));
    }
    return { res, text: await res.text(), setCookies, location: res.headers.get('location') ?? '' };
  }
}

/** Headers a client forges to pass for someone, in several spellings an application may read. */
export const FORGED: Record<string, string> = {
  'X-Service-User': 'forged-1',
  'X-Service-Email': 'forged-2@evil.example',
  'X-Service-User-Name': 'forged-3',
  'X-Service-Full-Name': 'forged-4',
  'X-Service-Auth-Type': 'forged-5',
  'X-Service-Session-Expires': 'forged-6',
  'X-Service-Assertion': 'forged-7',
  'X-Remote-User': 'forged-8',
  X_Service_User: 'forged-9',
  'x.service.email': 'forged-10',
  'Remote-User': 'forged-11',
  x_remote_user: 'forged-12',
};
