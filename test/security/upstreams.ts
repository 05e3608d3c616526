/**
 * Upstreams that read request paths their own way, for differential tests of the proxy: Python's
 * http.server (urllib.parse.unquote, posixpath.normpath) and nginx ($uri: decoded, slashes
 * merged, dot segments resolved). Each answers 200 with how it read the path.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../net.js';

export interface PathReader {
  name: string;
  url: string;
  port: number;
  /** The path readings in an answer body (what the upstream would serve). */
  readings(body: Buffer): string[];
  close(): Promise<void>;
}

const PYTHON = process.env.GATEHOUSE_PYTHON ?? 'python3';
const NGINX = process.env.GATEHOUSE_NGINX ?? '/usr/sbin/nginx';

/** Whether a program runs here; under CI=true a missing one fails the run instead of skipping. */
export function available(what: string, check: () => void): boolean {
  try {
    check();
    return true;
  } catch {
    if (process.env.CI === 'true') throw new Error(`${what} is missing and CI=true: install it`);
    process.stdout.write(`\n*** ${what} not found: its differential test is skipped ***\n\n`);
    return false;
  }
}

export const HAVE_PYTHON = available(PYTHON, () => execFileSync(PYTHON, ['--version'], { stdio: 'ignore' }));
export const HAVE_NGINX = available(NGINX, () => {
  if (!existsSync(NGINX)) throw new Error('missing');
});

const PY_HANDLER = `
import json, posixpath, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

class Reader(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        raw = self.path.split('?', 1)[0].split('#', 1)[0]
        decoded = unquote(raw, errors='surrogateescape')
        body = json.dumps({'path': self.path, 'unquoted': decoded,
                           'normalized': posixpath.normpath(decoded)}).encode()
        self.send_response(200)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client (the proxy's pool) closing a kept-alive connection is no news

server = Server(('127.0.0.1', 0), Reader)
print(server.server_address[1], flush=True)
server.serve_forever()
`;

export async function startPython(): Promise<PathReader> {
  const dir = mkdtempSync(join(tmpdir(), 'gh-py-upstream-'));
  const script = join(dir, 'reader.py');
  writeFileSync(script, PY_HANDLER);
  const child = spawn(PYTHON, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^(\d+)\n/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`python exited with ${code}`)));
  });
  return {
    name: 'python http.server',
    url: `http://127.0.0.1:${port}`,
    port,
    readings(body) {
      const j = JSON.parse(body.toString('utf8')) as { path: string; unquoted: string; normalized: string };
      return [j.path.split('?')[0] as string, j.unquoted, j.normalized];
    },
    close: () => stop(child, dir),
  };
}

export async function startNginx(): Promise<PathReader> {
  const dir = mkdtempSync(join(tmpdir(), 'gh-nginx-upstream-'));
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  const temp = (n: string) => `${n}_temp_path ${join(dir, n)};`;
  writeFileSync(
    conf,
    `daemon off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 64; }
http {
  access_log off;
  ${temp('client_body')} ${temp('proxy')} ${temp('fastcgi')} ${temp('uwsgi')} ${temp('scgi')}
  server {
    listen 127.0.0.1:${port};
    location / { default_type text/plain; return 200 "$uri"; }
  }
}
`,
  );
  const child = spawn(NGINX, ['-p', dir, '-e', join(dir, 'error.log'), '-c', conf], { stdio: 'ignore' });
  // Ready when it accepts connections.
  for (let i = 0; ; i++) {
    const ok = await new Promise<boolean>((r) => {
      const c = net.connect(port, '127.0.0.1', () => {
        c.destroy();
        r(true);
      });
      c.on('error', () => r(false));
    });
    if (ok) break;
    if (i > 100 || child.exitCode !== null) throw new Error('nginx did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    name: 'nginx',
    url: `http://127.0.0.1:${port}`,
    port,
    // $uri: the decoded path, as UTF-8 bytes.
    readings: (body) => [body.toString('utf8')],
    close: () => stop(child, dir),
  };
}

async function stop(child: ChildProcess, dir: string) {
  if (child.exitCode === null) {
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await gone;
  }
  rmSync(dir, { recursive: true, force: true });
}
