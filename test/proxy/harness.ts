import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { WebSocketServer } from 'ws';
import { loadProxyConfig, type ProxyConfigSources } from '../../src/config/proxy.js';
import { type AuthBackend, HttpAuthBackend } from '../../src/proxy/backend.js';
import { type RunningProxy, type StartProxyOptions, startProxy } from '../../src/proxy/run.js';
import { type Backend, startTestService, type TestService } from '../helpers.js';

export interface Echo {
  url: string;
  port: number;
  /** Requests the upstream received. */
  hits: { method: string; url: string; headers: http.IncomingHttpHeaders }[];
  /** Set by a test: called for /check requests to run an access check during the request. */
  onCheck?: (checkUrl: string, req: http.IncomingMessage) => Promise<{ status: number; body: string }>;
  /** The access-check URL of the last request (to try it after the request). */
  lastCheckUrl?: string;
  close(): Promise<void>;
}

/**
 * An upstream that echoes what it got as JSON: method, url, headers and the body's length.
 * /slow/* waits 2 s before answering; /stream sends its body in chunks; /ws* speaks websocket.
 */
export async function startEcho(tag = 'echo'): Promise<Echo> {
  const hits: Echo['hits'] = [];
  const echo: Partial<Echo> = { hits };
  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    hits.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    echo.lastCheckUrl = req.headers['x-service-access-check'] as string | undefined;
    if (req.url?.startsWith('/slow')) await new Promise((r) => setTimeout(r, 2000));
    if (req.url?.includes('/check') && echo.onCheck) {
      const r = await echo.onCheck(req.headers['x-service-access-check'] as string, req);
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify(r));
    }
    if (req.url?.startsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'text/plain', 'set-cookie': 'app=1; Path=/' });
      let i = 0;
      const t = setInterval(() => {
        res.write(`chunk${i}\n`);
        if (++i === 5) {
          clearInterval(t);
          res.end();
        }
      }, 20);
      return;
    }
    let size = 0;
    const hash = (await import('node:crypto')).createHash('sha256');
    for await (const c of req) {
      size += (c as Buffer).length;
      hash.update(c as Buffer);
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': tag, connection: 'keep-alive' });
    res.end(
      JSON.stringify({
        tag,
        method: req.method,
        url: req.url,
        headers: req.headers,
        size,
        sha256: hash.digest('hex'),
      }),
    );
  };
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws, req) => {
    ws.send(JSON.stringify({ hello: req.headers['x-service-email'] ?? null, url: req.url }));
    ws.on('message', (m) => ws.send(`echo:${m.toString()}`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(echo, {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  }) as Echo;
}

export interface World {
  s: TestService;
  serviceUrl: string;
  echo: Echo;
  appId: string;
  token: string;
  user: { id: string; email: string; userName: string; fullName: string };
  userKey: string;
  logs: string[];
  proxy(
    sources?: Omit<ProxyConfigSources, 'env'> & { env?: NodeJS.ProcessEnv },
    opts?: Partial<StartProxyOptions>,
  ): Promise<RunningProxy>;
  close(): Promise<void>;
}

/** The real service on a socket, an App with a proxy token, a user with a key, and an echo upstream. */
export async function startWorld(backend: Backend): Promise<World> {
  const s = await startTestService(backend);
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  const serviceUrl = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  const echo = await startEcho();
  const created = await s.req({
    method: 'POST',
    url: '/users',
    payload: { Email: 'ada@example.com', UserName: 'ada', Name: { FullName: 'Ada Lovelace' }, Active: true },
  });
  const userId = created.headers['x-id'] as string;
  const userKey = await s.keyFor(['user'], userId);
  const app = await s.req({
    method: 'POST',
    url: '/apps',
    payload: { Name: 'echo app', URL: 'http://127.0.0.1' },
  });
  const appId = app.headers['x-id'] as string;
  const tok = await s.req({ method: 'POST', url: `/apps/${appId}/proxytoken` });
  if (tok.statusCode !== 201) throw new Error(`proxytoken: ${tok.statusCode} ${tok.body}`);
  const token = tok.json().Token as string;
  const running: RunningProxy[] = [];
  const logs: string[] = [];
  return {
    s,
    serviceUrl,
    echo,
    appId,
    token,
    user: { id: userId, email: 'ada@example.com', userName: 'ada', fullName: 'Ada Lovelace' },
    userKey,
    logs,
    async proxy(sources = {}, opts = {}) {
      const src: ProxyConfigSources = {
        ...sources,
        env: {
          SVC_PROXY_TLS: 'false',
          SVC_PROXY_LISTEN: '127.0.0.1:0',
          SVC_PROXY_UPSTREAM: echo.url,
          SVC_AUTH_SERVER: serviceUrl,
          SVC_AUTH_TOKEN: token,
          ...sources.env,
        },
      };
      const logger = pino({ level: 'info' }, { write: (l: string) => void logs.push(l) });
      const p = await startProxy(loadProxyConfig(src), { logger, sources: src, ...opts });
      running.push(p);
      return p;
    },
    async close() {
      for (const p of running) await p.close();
      await echo.close();
      await s.close();
    },
  };
}

export const basic = (user: string, pass: string) =>
  `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

/** The real back channel to the world's service with some calls replaced (to count or fail them). */
export function serviceBackend(
  w: Pick<World, 'serviceUrl' | 'token'>,
  replace: (real: AuthBackend) => Partial<AuthBackend>,
): AuthBackend {
  const real = new HttpAuthBackend(w.serviceUrl, w.token);
  return {
    publicUrl: real.publicUrl,
    register: (r) => real.register(r),
    apiKey: (k) => real.apiKey(k),
    exchangeCode: (c) => real.exchangeCode(c),
    session: (s) => real.session(s),
    accessCheck: (r) => real.accessCheck(r),
    close: () => real.close(),
    ...replace(real),
  };
}

/**
 * Asks the proxy to register again (as SIGHUP does) and waits until what it learned satisfies
 * `ready`: a test that changes the App (its origins, its AccessGroups) after the proxy started.
 */
export async function relearn(
  p: RunningProxy,
  ready: (learned: NonNullable<RunningProxy['proxy']['learnedNow']>) => boolean,
): Promise<void> {
  const error = p.reload();
  if (error) throw error;
  const until = Date.now() + 10_000;
  for (;;) {
    const learned = p.proxy.learnedNow;
    if (learned && ready(learned)) return;
    if (Date.now() > until) throw new Error('the proxy did not learn the App as changed within 10 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}
