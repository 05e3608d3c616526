/**
 * A rig for testing what the proxy forwards: the service, a proxy with one path per mode in front
 * of an upstream that answers with the raw header names and values it received, a raw-socket
 * client, and fast-check spellings of header names.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import type { RunningProxy } from '../../src/proxy/run.js';
import type { Backend } from '../helpers.js';
import { basic, startWorld, type World } from '../proxy/harness.js';
import { finalResponses, rawExchange } from './raw.js';

/** How CGI, WSGI and PHP upstreams see a header name: case and separators do not count. */
export const canonical = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '-');

/** A spelling of `name` in random case with each "-" one of "-", "_", ".". */
export const spelled = (name: string) =>
  fc
    .tuple(
      fc.array(fc.constantFrom('-', '_', '.'), { minLength: 8, maxLength: 8 }),
      fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }),
    )
    .map(([seps, upper]) => {
      let i = 0;
      return [...name]
        .map((c, j) => (c === '-' ? (seps[i++ % seps.length] as string) : upper[j] ? c.toUpperCase() : c))
        .join('');
    });

/** `s` in random case. */
export const anyCase = (s: string) =>
  fc
    .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
    .map((up) => [...s].map((c, i) => (up[i] ? c.toUpperCase() : c.toLowerCase())).join(''));

/** What the upstream received: the request target and its raw headers (names as sent). */
export interface Seen {
  url: string;
  rawHeaders: string[];
}

/** Header pairs [name, value] as the upstream received them. */
export const pairs = (s: Seen): [string, string][] =>
  s.rawHeaders.flatMap((v, i) => (i % 2 ? [] : [[v, s.rawHeaders[i + 1] as string] as [string, string]]));

/** An upstream answering with the raw headers it got; each `?set=` value becomes a Set-Cookie. */
export async function startRecorder() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const set = new URL(req.url ?? '/', 'http://x').searchParams.getAll('set');
      res.writeHead(200, ['content-type', 'application/json', ...set.flatMap((c) => ['set-cookie', c])]);
      res.end(Buffer.from(JSON.stringify({ url: req.url, rawHeaders: req.rawHeaders }), 'utf8'));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** One path per mode (the proxy's default is required). */
export const MODES = { none: '/none/x', optional: '/opt/x', required: '/req/x' } as const;
export type Mode = keyof typeof MODES;
export const CREDENTIALS = ['none', 'bearer', 'basicUser', 'basicPassword', 'cookie'] as const;
export type Credential = (typeof CREDENTIALS)[number];

export interface Answer {
  status: number;
  headers: Record<string, string>;
  /** The upstream's report, when it answered (200). */
  seen: Seen | undefined;
  /** The answer body as UTF-8 text. */
  body: string;
}

export interface Rig {
  w: World;
  /** Host header value of the main proxy. */
  host: string;
  /** A proxy session cookie (`gatehouse_proxy=<signed proof>`) for the world's user. */
  signedCookie: string;
  /** Header lines carrying each kind of credential for the world's user. */
  credentials: Record<Credential, string[]>;
  /** One request on its own connection to the main proxy; `lines` are header lines without CRLF. */
  send(path: string, lines: string[], connection?: string, body?: string): Promise<Answer>;
  /** Another proxy with the same modes in front of `upstream`, and its `send`. */
  proxyTo(upstream: string): Promise<Rig['send']>;
  close(): Promise<void>;
}

const OVERRIDES = ['path_/none/_auth=none', 'path_/opt/_auth=optional'];

function sender(p: RunningProxy): Rig['send'] {
  const host = `127.0.0.1:${p.port}`;
  return async (path, lines, connection = 'close', body) => {
    const framing = body === undefined ? '' : `Content-Length: ${body.length}\r\n`;
    const head = `${body === undefined ? 'GET' : 'POST'} ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
    const text = `${head}${lines.map((l) => `${l}\r\n`).join('')}${framing}Connection: ${connection}\r\n\r\n${body ?? ''}`;
    const [r] = finalResponses(await rawExchange(p.port, text, { idleMs: 1000 }));
    if (!r) throw new Error('no response');
    const utf8 = Buffer.from(r.body, 'latin1').toString('utf8');
    const seen = r.status === 200 && utf8.startsWith('{"url"') ? (JSON.parse(utf8) as Seen) : undefined;
    return { status: r.status, headers: r.headers, seen, body: utf8 };
  };
}

export async function startRig(backend: Backend): Promise<Rig> {
  const w = await startWorld(backend);
  const recorder = await startRecorder();
  const p = await w.proxy({ env: { SVC_PROXY_UPSTREAM: recorder.url }, overrides: OVERRIDES });
  const id = { UserID: w.user.id, UserName: 'ada', Email: w.user.email, FullName: 'Ada', SessionID: 's1' };
  const signedCookie = `gatehouse_proxy=${(await p.proxy.signer.sign(id)).token}`;
  return {
    w,
    host: `127.0.0.1:${p.port}`,
    signedCookie,
    credentials: {
      none: [],
      bearer: [`Authorization: Bearer ${w.userKey}`],
      basicUser: [`Authorization: ${basic(w.userKey, '')}`],
      basicPassword: [`Authorization: ${basic('me', w.userKey)}`],
      cookie: [`Cookie: ${signedCookie}`],
    },
    send: sender(p),
    async proxyTo(upstream) {
      return sender(await w.proxy({ env: { SVC_PROXY_UPSTREAM: upstream }, overrides: OVERRIDES }));
    },
    async close() {
      await w.close();
      await recorder.close();
    },
  };
}

/** A mode and a credential, leaving out required without one (401, nothing forwarded). */
export const modeAndCredential = fc
  .tuple(fc.constantFrom<Mode>('none', 'optional', 'required'), fc.constantFrom<Credential>(...CREDENTIALS))
  .filter(([m, c]) => !(m === 'required' && c === 'none'));
