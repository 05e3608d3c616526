import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { ConfigError } from '../config/load.js';
import { loadProxyConfig, type ProxyConfig, type ProxyConfigSources, RESTART_KEYS } from '../config/proxy.js';
import { parseListen } from '../config/setting.js';
import { PROXY_TOKEN_PATTERN } from '../wire/proxy.js';
import type { AccessSink } from './accesslog.js';
import { type AuthBackend, BackendError, HttpAuthBackend } from './backend.js';
import { loadCookieKey } from './cookie.js';
import { defaultMode, type Learned, learnFrom } from './hosts.js';
import { startProxyMetrics } from './metrics.js';
import { AccessProxy } from './server.js';
import { TlsManager } from './tls.js';

export const PROXY_VERSION = '0.1.0';
/**
 * The proxy reports itself (RemoteAgent.LastSeen) this often, and learns the App's ProxyAuth and
 * VirtualHosts again: changes made at the service apply within this time (at once on SIGHUP).
 */
export const HEARTBEAT_MS = 5 * 60_000;
/** Until the first registration succeeds, it is tried again this often (not only per heartbeat). */
const FIRST_REGISTRATION_RETRY_MS = 15_000;

export interface RunningProxy {
  proxy: AccessProxy;
  /** http(s)://host:port of the main listener. */
  url: string;
  port: number;
  redirectPort: number | undefined;
  /** The Prometheus listener's port (proxy.metrics), when there is one. */
  metricsPort: number | undefined;
  tls: TlsManager | undefined;
  /** Re-reads the settings (SIGHUP): all or nothing; returns the error when the new ones are bad. */
  reload(): Error | undefined;
  close(): Promise<void>;
}

export interface StartProxyOptions {
  logger: Logger;
  /** Where the access log goes (one line per request); default `logger` (src/proxy/accesslog.ts). */
  accessLogger?: AccessSink | null;
  /** Where settings come from, kept for reloads. */
  sources?: ProxyConfigSources;
  /** For tests: a back channel other than HTTP to auth.server. */
  backend?: AuthBackend;
  upstreamTimeoutMs?: number;
  /** A client must send its whole request head within this time: else 408 (default 30 s). */
  headersTimeoutMs?: number;
  /** A request body that pauses this long between two chunks is cut off: 408 (default 30 s). */
  bodyIdleTimeoutMs?: number;
  /** A request waits this long at most for an upstream connection: else 503 (default 10 s). */
  queueTimeoutMs?: number;
  /** Upstream connections per upstream origin (default 256). */
  upstreamConnections?: number;
  cookieTtlS?: number;
  /** Skip the start-up registration (tests that have no service). */
  register?: boolean;
  /** For tests: how often to register again (default HEARTBEAT_MS). */
  heartbeatMs?: number;
  /** For tests: how soon to retry a failed first registration (default 15 s). */
  firstRetryMs?: number;
}

export async function startProxy(config: ProxyConfig, opts: StartProxyOptions): Promise<RunningProxy> {
  const log = opts.logger;
  // With the real back channel, a proxy that could never authenticate anyone does not start
  // (it would listen and answer 503 to everything); tests passing their own backend may omit it.
  if (!opts.backend) {
    const problem = tokenProblem(config.auth.token);
    if (problem) throw new ConfigError('auth.token', problem);
  }
  let cookieKey: ReturnType<typeof loadCookieKey>;
  try {
    cookieKey = loadCookieKey(config.proxy.cookiekey);
  } catch (e) {
    throw new ConfigError('proxy.cookiekey', (e as Error).message);
  }
  if (cookieKey.generated)
    log.warn('proxy.cookiekey is unset: generated a key; session cookies will not survive a restart');
  const tlsManager = config.proxy.tls ? await TlsManager.create(config, log) : undefined;
  const backend = opts.backend ?? new HttpAuthBackend(config.auth.server, config.auth.token);
  const proxy = new AccessProxy({
    config,
    backend,
    logger: log,
    accessLogger: opts.accessLogger,
    cookieKey: cookieKey.key,
    secure: config.proxy.tls,
    upstreamTimeoutMs: opts.upstreamTimeoutMs,
    bodyIdleTimeoutMs: opts.bodyIdleTimeoutMs,
    queueTimeoutMs: opts.queueTimeoutMs,
    upstreamConnections: opts.upstreamConnections,
    cookieTtlS: opts.cookieTtlS,
  });
  if (proxy.tokenProblem) log.error({ reason: proxy.tokenProblem }, 'the proxy cannot authenticate users');
  if (proxy.assertions.generated)
    log.warn(
      'proxy.assertionkey is unset: generated a key; X-Service-Assertion keys change at restart and differ between proxies',
    );

  const headersTimeoutMs = opts.headersTimeoutMs ?? 30_000;
  // Node checks the headers timeout only this often (30 s by default, doubling the bound).
  const timing = {
    headersTimeout: headersTimeoutMs,
    connectionsCheckingInterval: Math.max(100, Math.min(5_000, Math.floor(headersTimeoutMs / 4))),
  };
  const m = config.proxy.metrics ? parseListen(config.proxy.metrics) : undefined;
  const metrics = m ? await startProxyMetrics(m.host, m.port) : undefined;
  const handler = metrics ? metrics.wrap(proxy.handler) : proxy.handler;
  const server = tlsManager
    ? https.createServer({ ...tlsManager.serverOptions(), ...timing }, handler)
    : http.createServer(timing, handler);
  server.keepAliveTimeout = 65_000;
  // Not the whole request: long uploads are fine as long as the body keeps coming (the upstream
  // pool's body idle timeout); the head must come within headersTimeout.
  server.requestTimeout = 0;
  server.on('upgrade', proxy.upgrade);
  // Expect: 100-continue: Node would answer 100 before the proxy has authenticated anyone, inviting
  // the body of a request about to be refused; the proxy says Continue itself when it uses the body.
  server.on('checkContinue', proxy.handler);
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return void socket.destroy();
    // A request head not complete within headersTimeout (slow loris) is a timeout, not malformed.
    socket.end(
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'HTTP/1.1 408 Request Timeout\r\nconnection: close\r\nx-error-code: Request Timeout\r\ncontent-length: 0\r\n\r\n'
        : 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n',
    );
  });

  const main = parseListen(config.proxy.listen);
  await listen(server, main.host, main.port);
  const port = (server.address() as AddressInfo).port;
  const host = main.host.includes(':') ? `[${main.host}]` : main.host;
  const url = `${config.proxy.tls ? 'https' : 'http'}://${host}:${port}`;

  let redirect: http.Server | undefined;
  if (tlsManager && config.redirect.listen !== 'off') {
    redirect = http.createServer(tlsManager.redirectHandler(port));
    const r = parseListen(config.redirect.listen);
    await listen(redirect, r.host, r.port);
  }
  if (tlsManager) {
    proxy.onFirstHost = (name) => tlsManager.learnName(name);
    proxy.holdsCertificateFor = (name) => tlsManager.serves(name);
  }

  let heartbeat: NodeJS.Timeout | undefined;
  let closed = false;
  // Registrations may overlap (heartbeat and SIGHUP): an older answer never replaces a newer one.
  let asked = 0;
  let applied = 0;
  let learned: Learned | undefined;
  let retry: NodeJS.Timeout | undefined;
  const register = async () => {
    if (proxy.tokenProblem && !proxy.appId) return;
    const n = ++asked;
    try {
      const r = await backend.register({
        Name: hostname(),
        Version: PROXY_VERSION,
        Address: proxy.config.proxy.name || proxy.learnedName || '',
      });
      if (n < applied) return;
      applied = n;
      tlsManager?.setVirtualHosts(r.VirtualHosts);
      // A failed registration keeps what was learned before (else the defaults: fail closed).
      learned = learnFrom(r, log);
      proxy.setLearned(learned);
      log.info(
        {
          app: r.AppID,
          agent: r.RemoteAgentID,
          mode: defaultMode(proxy.config, learned),
          hosts: learned.hosts.size,
        },
        'registered with the service',
      );
    } catch (e) {
      if (e instanceof BackendError && e.proxyRejected) {
        proxy.tokenProblem = `the service refused auth.token (${e.message})`;
        log.error(
          { reason: e.message },
          'the service refused auth.token: the proxy cannot authenticate users',
        );
      } else log.warn({ err: String(e) }, 'could not register with the service; will retry');
      // Until the service has answered once, VirtualHost routes and App.ProxyAuth are unknown
      // (requests get the fail-closed defaults): ask again soon rather than at the next heartbeat.
      if (learned === undefined && !closed && !retry && !proxy.tokenProblem) {
        retry = setTimeout(() => {
          retry = undefined;
          void register();
        }, opts.firstRetryMs ?? FIRST_REGISTRATION_RETRY_MS);
        retry.unref();
      }
    }
  };
  if (opts.register !== false) {
    await register();
    heartbeat = setInterval(() => void register(), opts.heartbeatMs ?? HEARTBEAT_MS);
    heartbeat.unref();
  }
  log.info(
    { url, mode: defaultMode(config, learned), upstream: config.proxy.upstream },
    'gatehouse proxy listening',
  );

  return {
    proxy,
    url,
    port,
    redirectPort: redirect ? (redirect.address() as AddressInfo).port : undefined,
    metricsPort: metrics?.port,
    tls: tlsManager,
    reload() {
      if (!opts.sources) return new Error('no settings sources to reload from');
      let next: ProxyConfig;
      try {
        next = loadProxyConfig(opts.sources);
      } catch (e) {
        log.error(
          { reason: (e as Error).message },
          'reload refused: the settings are bad; keeping the old ones',
        );
        return e as Error;
      }
      const stale = RESTART_KEYS.filter(
        ([s, k]) =>
          (next[s] as Record<string, unknown>)[k] !== (proxy.config[s] as Record<string, unknown>)[k],
      ).map(([s, k]) => `${s}.${k}`);
      if (stale.length) log.warn({ settings: stale }, 'these settings change only at restart');
      proxy.setConfig({
        ...next,
        ...Object.fromEntries(
          (['proxy', 'auth', 'redirect', 'acme'] as const).map((s) => [
            s,
            {
              ...next[s],
              ...Object.fromEntries(
                RESTART_KEYS.filter(([x]) => x === s).map(([, k]) => [
                  k,
                  (proxy.config[s] as Record<string, unknown>)[k],
                ]),
              ),
            },
          ]),
        ),
      } as ProxyConfig);
      log.info({ prefixes: next.prefixes.length }, 'settings reloaded');
      // Ask the service again too: a changed ProxyAuth or VirtualHost applies at once.
      if (opts.register !== false && !closed) void register();
      return undefined;
    },
    async close() {
      if (closed) return;
      closed = true;
      if (heartbeat) clearInterval(heartbeat);
      if (retry) clearTimeout(retry);
      server.closeIdleConnections?.();
      await Promise.all([close(server), redirect ? close(redirect) : undefined, metrics?.close()]);
      await proxy.close();
      if (!opts.backend) await backend.close();
      tlsManager?.close();
    },
  };
}

/** Why auth.token cannot be a proxy token, or undefined; never echoes the value (it is a secret). */
export function tokenProblem(token: string): string | undefined {
  if (token === '') return 'is not set: issue one with POST /apps/<app id>/proxytoken';
  if (!PROXY_TOKEN_PATTERN.test(token))
    return `is malformed (${token.length} characters): expected gp.<app id>.<43 characters>, as POST /apps/<app id>/proxytoken returns it`;
  return undefined;
}

function listen(server: http.Server, host: string, port: number) {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function close(server: http.Server) {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections?.();
  });
}
