/** Starting the proxy: its keys, the access proxy, its listeners, its registration, reloads. */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { ConfigError } from '../config/load.js';
import { loadProxyConfig, type ProxyConfig, type ProxyConfigSources } from '../config/proxy.js';
import { parseListen } from '../config/setting.js';
import { PROXY_TOKEN_PATTERN } from '../wire/proxy.js';
import type { AccessSink } from './accesslog.js';
import { type AuthBackend, HttpAuthBackend } from './backend.js';
import { loadCookieKey } from './cookie.js';
import { errorOf } from './errorcodes.js';
import { defaultMode } from './hosts.js';
import { startProxyMetrics } from './metrics.js';
import { Registration } from './registration.js';
import { AccessProxy } from './server.js';
import { reloadedConfig } from './snapshot.js';
import { TlsManager } from './tls.js';

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
  /** For tests: how often to register again (default HEARTBEAT_MS, src/proxy/registration.ts). */
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
  const tlsManager = config.proxy.tls ? await TlsManager.create(config, log) : undefined;
  const backend = opts.backend ?? new HttpAuthBackend(config.auth.server, config.auth.token);
  const proxy = createAccessProxy(config, opts, backend);
  const m = config.proxy.metrics ? parseListen(config.proxy.metrics) : undefined;
  const metrics = m ? await startProxyMetrics(m.host, m.port) : undefined;
  const server = mainServer(proxy, tlsManager, metrics?.wrap(proxy.handler) ?? proxy.handler, opts);
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
    proxy.firstHost.onLearned = (name) => tlsManager.learnName(name);
    proxy.holdsCertificateFor = (name) => tlsManager.serves(name);
  }

  const registration = new Registration({
    proxy,
    backend,
    tls: tlsManager,
    log,
    heartbeatMs: opts.heartbeatMs,
    firstRetryMs: opts.firstRetryMs,
  });
  if (opts.register !== false) await registration.start();
  log.info(
    { url, mode: defaultMode(config, registration.learned), upstream: config.proxy.upstream },
    'gatehouse proxy listening',
  );

  let closed = false;
  return {
    proxy,
    url,
    port,
    redirectPort: redirect ? (redirect.address() as AddressInfo).port : undefined,
    metricsPort: metrics?.port,
    tls: tlsManager,
    reload() {
      const error = reloadSettings(proxy, opts.sources, log);
      // Ask the service again too: a changed ProxyAuth or VirtualHost applies at once.
      if (!error && opts.register !== false && !closed) void registration.register();
      return error;
    },
    async close() {
      if (closed) return;
      closed = true;
      registration.stop();
      server.closeIdleConnections?.();
      await Promise.all([close(server), redirect ? close(redirect) : undefined, metrics?.close()]);
      await proxy.close();
      if (!opts.backend) await backend.close();
      tlsManager?.close();
    },
  };
}

/** The access proxy with its keys (proxy.cookiekey, proxy.assertionkey), warning when they are generated. */
function createAccessProxy(config: ProxyConfig, opts: StartProxyOptions, backend: AuthBackend): AccessProxy {
  const log = opts.logger;
  let cookieKey: ReturnType<typeof loadCookieKey>;
  try {
    cookieKey = loadCookieKey(config.proxy.cookiekey);
  } catch (e) {
    throw new ConfigError('proxy.cookiekey', (e as Error).message);
  }
  if (cookieKey.generated)
    log.warn('proxy.cookiekey is unset: generated a key; session cookies will not survive a restart');
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
  return proxy;
}

/** The main listener (HTTP, or HTTPS with the TLS manager's certificates), not yet listening. */
function mainServer(
  proxy: AccessProxy,
  tlsManager: TlsManager | undefined,
  handler: http.RequestListener,
  opts: StartProxyOptions,
): http.Server {
  const headersTimeoutMs = opts.headersTimeoutMs ?? 30_000;
  // Node checks the headers timeout only this often (30 s by default, doubling the bound).
  const timing = {
    headersTimeout: headersTimeoutMs,
    connectionsCheckingInterval: Math.max(100, Math.min(5_000, Math.floor(headersTimeoutMs / 4))),
  };
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
    socket.end(err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? HEAD_TIMEOUT : MALFORMED);
  });
  return server;
}

/** The raw answers to a request Node's parser gave up on (clientError): no body, connection closed. */
const rawAnswer = ({ status, code }: { status: number; code: string }, phrase: string) =>
  `HTTP/1.1 ${status} ${phrase}\r\nconnection: close\r\nx-error-code: ${code}\r\ncontent-length: 0\r\n\r\n`;
const HEAD_TIMEOUT = rawAnswer(errorOf('HeadTimeout'), 'Request Timeout');
const MALFORMED = rawAnswer(errorOf('MalformedRequest'), 'Bad Request');

/**
 * Re-reads the settings (SIGHUP): all or nothing. The settings that change only at restart keep
 * their values (with a warning when they differ); the proxy swaps in a snapshot of the rest.
 */
function reloadSettings(
  proxy: AccessProxy,
  sources: ProxyConfigSources | undefined,
  log: Logger,
): Error | undefined {
  if (!sources) return new Error('no settings sources to reload from');
  let next: ProxyConfig;
  try {
    next = loadProxyConfig(sources);
  } catch (e) {
    log.error({ reason: (e as Error).message }, 'reload refused: the settings are bad; keeping the old ones');
    return e as Error;
  }
  const { config, stale } = reloadedConfig(next, proxy.current.config);
  if (stale.length) log.warn({ settings: stale }, 'these settings change only at restart');
  proxy.setConfig(config);
  log.info({ prefixes: next.prefixes.length }, 'settings reloaded');
  return undefined;
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
