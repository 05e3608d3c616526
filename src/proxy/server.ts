// Over 400 lines: the one class every request passes through (dispatch, forwarding, upgrades and
// the origin they are built on share its per-proxy state); forward auth, bodies, logs, pages and
// identity live in their own files.
import type { KeyObject } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type { Logger } from 'pino';
import { AddressMatcher } from '../config/addresses.js';
import type { ProxyConfig } from '../config/proxy.js';
import { routeFor } from '../config/routing.js';
import { declaresBody } from '../core/unusedbody.js';
import { PROXY_PATHS } from '../wire/proxy.js';
import { AccessLog, type AccessRecord, type AccessSink } from './accesslog.js';
import { AssertionSigner } from './assertion.js';
import type { AuthBackend } from './backend.js';
import { type BodyLimits, BodyWatch } from './body.js';
import { COOKIE_NAME, type CookieSigner } from './cookie.js';
import type { ApiKeyCache } from './credentials.js';
import { type InFlight, newToken, ProxyEndpoints } from './endpoints.js';
import { HttpError, rawResponse, sendError, upstreamError } from './errors.js';
import { ForwardAuth, RefusedError } from './forwardauth.js';
import { upstreamHeaders } from './headers.js';
import { HostRoutes, httpOrigin, type Learned } from './hosts.js';
import { continueIfExpected, hostOf, listenerOrigin, redact, requestTarget } from './http.js';
import { type AuthOutcome, IdentityResolver } from './identity.js';
import { Readiness } from './readiness.js';
import { refusal } from './refusal.js';
import { Relay } from './relay.js';
import { isWebsocketUpgrade, rawError, UpgradeRelay } from './upgrade.js';
import { UpstreamPool } from './upstream/pool.js';
import { type UpstreamTarget, upstreamTarget } from './upstream/request.js';

const EMPTY: ReadonlySet<string> = new Set();

export interface ProxyOptions {
  config: ProxyConfig;
  backend: AuthBackend;
  logger: Logger;
  /** Where the access log goes (one line per request); default `logger`; null: nowhere. */
  accessLogger?: AccessSink | null;
  cookieKey: KeyObject;
  /** Whether clients reach this proxy over TLS (cookies get Secure, URLs https). */
  secure: boolean;
  /** No response headers from the upstream within this time: 504. */
  upstreamTimeoutMs?: number;
  /** A request waits this long at most for an upstream connection (all busy): then 503. */
  queueTimeoutMs?: number;
  /** A request body that pauses this long between two chunks is cut off: 408. */
  bodyIdleTimeoutMs?: number;
  /** Upstream connections per upstream origin (default 256). */
  upstreamConnections?: number;
  /** Lifetime of the signed session cookie (seconds). */
  cookieTtlS?: number;
}

/**
 * The access proxy's request handling: decide the mode for the normalized path, identify the
 * user (API key or signed cookie), strip spoofable headers, add identity headers and forward,
 * streaming bodies both ways. Listening (HTTP or TLS) is done by the caller with `handler` and
 * `upgrade`. Who a request is for is worked out in identity.ts, the upstream's header lines in
 * headers.ts, and the proxy's own endpoints (/.gatehouse/…) answer in endpoints.ts.
 */
export class AccessProxy {
  config: ProxyConfig;
  readonly appId: string | undefined;
  readonly keys: ApiKeyCache;
  readonly signer: CookieSigner;
  /** Who requests are for: API keys, session cookies, the sign-in handshake (src/proxy/identity.ts). */
  private readonly identity: IdentityResolver;
  /** The proxy's own endpoints under /.gatehouse/ (src/proxy/endpoints.ts). */
  private readonly endpoints: ProxyEndpoints;
  private readonly pool: UpstreamPool;
  private readonly inflight = new Map<string, InFlight>();
  /** Signs X-Service-Assertion and serves its keys (src/proxy/assertion.ts). */
  readonly assertions: AssertionSigner;
  /** The last response started on each client connection (pipelined responses go out in order). */
  private readonly lastResponse = new WeakMap<object, ServerResponse>();
  private readonly upstreams = new Map<string, { target: UpstreamTarget; base: string }>();
  private readonly log: Logger;
  /** The first request's host, when proxy.name is unset. */
  learnedName: string | undefined;
  onFirstHost: ((host: string) => void) | undefined;
  /** What the last successful registration said (App.ProxyAuth, VirtualHosts); kept through outages. */
  private learned: Learned | undefined;
  /** Defaults per Host from `config` and `learned`; rebuilt when either changes, never mutated. */
  private routes: HostRoutes;
  /** Answers nginx's, Traefik's and Caddy's forward-auth subrequests (src/proxy/forwardauth.ts). */
  private readonly forwardAuth: ForwardAuth;
  /** proxy.trustedproxies, compiled; rebuilt when the setting changes. */
  private trusted: AddressMatcher;
  private readonly accessLog: AccessLog;
  /** Request bodies being read or streamed, watched for a minimum rate (src/proxy/body.ts). */
  private readonly bodies: BodyWatch;
  /** Whether the service answers, for the health endpoint (src/proxy/readiness.ts). */
  readonly readiness: Readiness;

  constructor(private readonly opts: ProxyOptions) {
    this.config = opts.config;
    this.routes = new HostRoutes(opts.config, undefined);
    this.log = opts.logger;
    this.accessLog = new AccessLog(opts.accessLogger === undefined ? opts.logger : opts.accessLogger);
    const stallMs = opts.bodyIdleTimeoutMs ?? opts.config.proxy.bodytimeout * 1000;
    this.bodies = new BodyWatch(Math.max(50, Math.min(1_000, Math.floor(stallMs / 4))));
    this.trusted = new AddressMatcher(opts.config.proxy.trustedproxies);
    this.identity = new IdentityResolver({
      token: opts.config.auth.token,
      backend: opts.backend,
      logger: opts.logger,
      cookieKey: opts.cookieKey,
      secure: opts.secure,
      cookieTtlS: opts.cookieTtlS,
      config: () => this.config,
      originOf: (req) => this.originOf(req),
    });
    this.appId = this.identity.appId;
    this.keys = this.identity.keys;
    this.signer = this.identity.signer;
    this.assertions = new AssertionSigner(() => this.config.proxy.assertionkey, this.appId ?? '');
    this.endpoints = new ProxyEndpoints({
      assertions: this.assertions,
      identity: this.identity,
      backend: opts.backend,
      inflight: this.inflight,
      bodyIdleTimeoutMs: opts.bodyIdleTimeoutMs,
      originOf: (req) => this.originOf(req),
      callbackOrigin: (req) => this.callbackOrigin(req),
    });
    this.forwardAuth = new ForwardAuth({
      identity: this.identity,
      assertions: this.assertions,
      config: () => this.config,
      routes: () => this.routes,
      trusted: () => this.trusted,
      origins: () => this.learned?.origins ?? EMPTY,
    });
    this.readiness = new Readiness(opts.backend, () => this.identity.tokenProblem);
    const timeout = opts.upstreamTimeoutMs ?? 60_000;
    this.pool = new UpstreamPool({
      keepAliveMs: 30_000,
      connections: opts.upstreamConnections ?? 256,
      headersTimeoutMs: timeout,
      connectTimeoutMs: Math.min(timeout, 10_000),
      queueTimeoutMs: opts.queueTimeoutMs,
      bodyIdleTimeoutMs: opts.bodyIdleTimeoutMs,
    });
  }

  /** Replaces the settings (SIGHUP); requests in flight keep the ones they started with. */
  setConfig(config: ProxyConfig) {
    this.config = config;
    if (config.proxy.trustedproxies !== this.trusted.text)
      this.trusted = new AddressMatcher(config.proxy.trustedproxies);
    const keyProblem = this.assertions.reload();
    if (keyProblem)
      this.log.error(
        { reason: keyProblem.message },
        'proxy.assertionkey could not be read: keeping the old key',
      );
    this.routes = new HostRoutes(config, this.learned);
    this.lastPort = -1;
    this.upstreams.clear();
  }

  /** What the service said at the last registration (for health reports and tests). */
  get learnedNow(): Learned | undefined {
    return this.learned;
  }

  /** Takes what the service said at registration: requests from now on route by it. */
  setLearned(learned: Learned) {
    this.learned = learned;
    this.routes = new HostRoutes(this.config, learned);
    this.lastPort = -1;
    // VirtualHost upstreams may have changed: keep parsed URLs for the current settings only.
    this.upstreams.clear();
  }

  /** Set when the service refused our token: requests needing a user fail with this message. */
  get tokenProblem(): string | undefined {
    return this.identity.tokenProblem;
  }

  set tokenProblem(problem: string | undefined) {
    this.identity.tokenProblem = problem;
  }

  get inFlightCount() {
    return this.inflight.size;
  }

  async close() {
    this.bodies.close();
    await this.pool.close();
  }

  private upstream(raw: string) {
    let u = this.upstreams.get(raw);
    if (!u) {
      const url = new URL(raw);
      u = { target: upstreamTarget(url), base: url.pathname.replace(/\/+$/, '') };
      this.upstreams.set(raw, u);
    }
    return u;
  }

  /** Set when the proxy serves TLS: does it hold a certificate for this (lower-case) name? */
  holdsCertificateFor: ((name: string) => boolean) | undefined;

  /** The last Host header and local address seen, and their origin: clients mostly send the same. */
  private lastHost: string | undefined;
  private lastAddress: string | undefined;
  private lastPort = -1;
  private lastOrigin = '';

  /**
   * The proxy's origin as this request reached it, built only from what the proxy has checked:
   * the listener's scheme; the Host's name only when the proxy serves it (proxy.name, a
   * VirtualHost of the App, a name it holds a certificate for), else the connection's local
   * address; and always the port the connection arrived on, never the client's. The upstream
   * POSTs access checks to it and sign-in links are built from it, so a Host, X-Forwarded-Host or
   * Forwarded header of the client's choosing must not steer it (to an attacker's listener that
   * would answer 200). A name learned from the first plaintext request does not count.
   */
  private originOf(req: IncomingMessage): string {
    const host = req.headers.host;
    const { localAddress, localPort } = req.socket;
    if (host === this.lastHost && localPort === this.lastPort && localAddress === this.lastAddress)
      return this.lastOrigin;
    const name = hostOf(req);
    const served =
      name !== undefined && (this.routes.serves(name) || this.holdsCertificateFor?.(name) === true);
    const origin = listenerOrigin(this.opts.secure, served ? name : undefined, localAddress, localPort);
    this.lastHost = host;
    this.lastAddress = localAddress;
    this.lastPort = localPort ?? -1;
    this.lastOrigin = origin;
    return origin;
  }

  /**
   * The origin a request reached: behind a trusted front proxy (forward auth), its Host with the
   * scheme the front proxy says (X-Forwarded-Proto), else the proxy's own (originOf). Used only to
   * start a sign-in again at the callback; the service accepts the callback URL on an origin of
   * the App only.
   */
  private callbackOrigin(req: IncomingMessage): string {
    const host = req.headers.host;
    if (host === undefined || !this.trusted.matches(req.socket.remoteAddress)) return this.originOf(req);
    const proto = req.headers['x-forwarded-proto'];
    const scheme = proto === 'https' || proto === 'http' ? proto : this.opts.secure ? 'https' : 'http';
    return httpOrigin(`${scheme}://${host}/`) ?? this.originOf(req);
  }

  /** proxy.privateaddress without trailing slashes, recomputed only when the setting changes. */
  private privateRaw: string | undefined;
  private privateBase = '';

  private privateAddress(): string {
    const raw = this.config.proxy.privateaddress;
    if (raw !== this.privateRaw) {
      this.privateRaw = raw;
      this.privateBase = raw.replace(/\/+$/, '');
    }
    return this.privateBase;
  }

  // ---- request entry points -----------------------------------------------------------------

  readonly handler = (req: IncomingMessage, res: ServerResponse) => {
    this.lastResponse.set(req.socket, res);
    const rec = this.accessLog.start(req, res);
    // Synchronous when the credential is cached (the common case): no promise per request.
    try {
      const pending = this.handle(req, res, rec);
      if (pending) pending.catch((e: unknown) => this.fail(req, res, e));
    } catch (e) {
      this.fail(req, res, e);
    }
  };

  private handle(req: IncomingMessage, res: ServerResponse, rec: AccessRecord): Promise<void> | undefined {
    const { path, query } = requestTarget(req.url);
    this.learnHost(req);
    if (path.startsWith(PROXY_PATHS.base)) return this.internal(req, res, rec, path, query);
    const route = routeFor(this.config, path, this.routes.defaultsFor(req.headers.host));
    rec.mode = route.auth;
    const auth = this.identity.authenticate(req, route.auth);
    if (auth instanceof Promise)
      return auth.then((a) => this.forward(req, res, rec, route.upstream, path, query, a));
    this.forward(req, res, rec, route.upstream, path, query, auth);
    return undefined;
  }

  /** The proxy's own paths: forward auth and health here, the others in endpoints.ts. */
  private internal(
    req: IncomingMessage,
    res: ServerResponse,
    rec: AccessRecord,
    path: string,
    query: string,
  ): Promise<void> | undefined {
    if (path === PROXY_PATHS.authRequest || path === PROXY_PATHS.forwardAuth)
      return this.forwardAuth.answerFor(
        req,
        res,
        path === PROXY_PATHS.authRequest ? 'auth-request' : 'forward-auth',
        rec,
      );
    if (path === PROXY_PATHS.health) return this.readiness.answer(req, res);
    return this.endpoints.internal(req, res, path, query);
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    rec: AccessRecord,
    upstream: string,
    path: string,
    query: string,
    auth: AuthOutcome,
  ) {
    if (!auth.ok) return this.refuse(req, res, auth);
    // Authentication may have waited on the service. A client gone meanwhile has had its 'close'
    // already: nothing would ever end the exchange or invalidate its access-check URL.
    if (res.destroyed) return;
    const who = auth.who;
    if (who) {
      rec.user = who.identity.UserID;
      rec.authType = who.authType;
    }
    rec.upstream = upstream;
    const token = newToken();
    const origin = this.originOf(req);
    this.inflight.set(token, { identity: who?.identity, origin });
    const up = this.upstream(upstream);
    const head = `${req.method} ${up.base}${path}${query} HTTP/1.1\r\n${upstreamHeaders(req, auth, token, this.privateAddress() || origin, up.target, this.opts.secure, this.assertions)}`;
    const length = req.headers['content-length'];
    const hasBody = declaresBody(req);
    // Cookies to set on the response: none on the common request.
    const extraCookies =
      who?.setCookie || auth.clearCookie
        ? [
            ...(who?.setCookie ? [who.setCookie] : []),
            ...(auth.clearCookie ? [this.identity.cookie(COOKIE_NAME, '', 0)] : []),
          ]
        : undefined;
    const relay = new Relay(res, extraCookies, (e) => this.fail(req, res, e));
    const contentLength = length === undefined ? undefined : Number(length);
    const send = (body: Readable | null) => {
      if (res.destroyed) return;
      relay.exchange = this.pool.request(
        {
          target: up.target,
          method: req.method ?? 'GET',
          head,
          body,
          // Node has checked Content-Length; a body without one is sent chunked.
          contentLength,
        },
        relay,
      );
    };
    res.once('close', () => {
      this.inflight.delete(token);
      if (!res.writableFinished) relay.exchange?.abort();
    });
    if (!hasBody) return send(null);
    continueIfExpected(req, res);
    // The body's first part is read here at an acceptable rate before a connection is taken
    // (src/proxy/body.ts): a trickling client holds no upstream connection.
    const limits = this.bodyLimits();
    this.bodies
      .gate(req, contentLength, limits, (e) => {
        relay.exchange?.abort();
        this.slowBody(req, res, e);
      })
      .then(send, (e: unknown) => this.slowBody(req, res, e));
  }

  /** A body too slow (408) or cut off: answered, and the connection closed (the rest never comes). */
  private slowBody(req: IncomingMessage, res: ServerResponse, e: unknown) {
    if (!res.headersSent) res.shouldKeepAlive = false;
    this.fail(req, res, e);
  }

  private bodyLimits(): BodyLimits {
    const p = this.config.proxy;
    // bodyIdleTimeoutMs (tests) replaces proxy.bodytimeout.
    return { minRate: p.bodyminrate, stallMs: this.opts.bodyIdleTimeoutMs ?? p.bodytimeout * 1000 };
  }

  readonly upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const rec = this.accessLog.startUpgrade(req, socket);
    // An upgrade pipelined behind requests whose responses are still going out waits for them:
    // anything written on the raw socket before would be read as the answer to an earlier request.
    const earlier = this.lastResponse.get(socket);
    const turn =
      earlier && !earlier.writableFinished && !earlier.destroyed
        ? new Promise<void>((resolve) => earlier.once('close', () => resolve()))
        : undefined;
    const handled = turn
      ? turn.then(() => (socket.destroyed ? undefined : this.handleUpgrade(req, socket, head, rec)))
      : this.handleUpgrade(req, socket, head, rec);
    handled.catch((e: unknown) => {
      const err = e instanceof HttpError ? e : upstreamError(e);
      rec.status = err.status;
      if (!(e instanceof HttpError)) this.log.warn({ err: String(e) }, 'websocket upgrade failed');
      rawError(socket, err);
    });
  };

  /**
   * An upgrade request, authenticated like any request. A websocket handshake goes upstream
   * asking for websocket and becomes a tunnel only on a 101 naming it; any other Upgrade is
   * forwarded as an ordinary request without it. Either way a non-101 answer is relayed and the
   * client connection closed (src/proxy/upgrade.ts).
   */
  private async handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, rec: AccessRecord) {
    const { path, query } = requestTarget(req.url);
    this.learnHost(req);
    if (path.startsWith(PROXY_PATHS.base)) throw new HttpError(404, 'Not Found', 'no websocket here');
    // Node passes the body of an upgrade request on unframed, as if it were tunnel data.
    if (declaresBody(req)) throw new HttpError(400, 'Bad Request', 'an upgrade request cannot have a body');
    const route = routeFor(this.config, path, this.routes.defaultsFor(req.headers.host));
    rec.mode = route.auth;
    const auth = await this.identity.authenticate(req, route.auth);
    if (!auth.ok) {
      rec.status = auth.status;
      rec.error = auth.code;
      rawResponse(
        socket,
        auth.status,
        { 'content-type': 'text/plain; charset=utf-8', ...auth.headers },
        `${auth.message}\n`,
      );
      return;
    }
    if (socket.destroyed) return;
    rec.user = auth.who?.identity.UserID ?? null;
    rec.authType = auth.who?.authType ?? null;
    rec.upstream = route.upstream;
    const token = newToken();
    const origin = this.originOf(req);
    this.inflight.set(token, { identity: auth.who?.identity, origin });
    const up = this.upstream(route.upstream);
    const websocket = isWebsocketUpgrade(req);
    let lines = `${req.method} ${up.base}${path}${query} HTTP/1.1\r\n${upstreamHeaders(req, auth, token, this.privateAddress() || origin, up.target, this.opts.secure, this.assertions)}`;
    if (websocket) lines += 'connection: Upgrade\r\nupgrade: websocket\r\n';
    const cookies = [
      ...(auth.who?.setCookie ? [auth.who.setCookie] : []),
      ...(auth.clearCookie ? [this.identity.cookie(COOKIE_NAME, '', 0)] : []),
    ];
    const relay = new UpgradeRelay(
      socket,
      cookies.length > 0 ? cookies : undefined,
      () => this.inflight.delete(token),
      this.log,
    );
    relay.start(
      this.pool,
      {
        target: up.target,
        method: req.method ?? 'GET',
        head: lines,
        body: null,
        contentLength: undefined,
        upgrade: websocket,
      },
      head,
    );
  }

  // ---- responses ----------------------------------------------------------------------------

  /**
   * A refused request: 302 to sign in, 401, or 403 with the error page, which for a user the App
   * is closed to names the App and links to its access-request page (when the service said where).
   */
  private refuse(req: IncomingMessage, res: ServerResponse, out: Extract<AuthOutcome, { ok: false }>) {
    const r = refusal(out, this.learned);
    sendError(req, res, out.status, out.code, r.message, r.headers, r.detail);
  }

  private fail(req: IncomingMessage, res: ServerResponse, e: unknown) {
    if (e instanceof RefusedError && !res.headersSent) return this.refuse(req, res, e.outcome);
    const err =
      e instanceof HttpError ? e : new HttpError(500, 'Internal Error', 'internal error in the proxy');
    if (!(e instanceof HttpError)) this.log.error({ err: e }, 'proxy error');
    else if (err.status >= 500)
      this.log.warn(
        { status: err.status, reason: err.message, cause: err.cause, url: redact(req.url) },
        'proxy answered an error',
      );
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(
      req,
      res,
      err.status,
      err.code,
      err.message,
      {},
      { appName: this.learned?.appName || undefined },
    );
  }

  /** A Host header already found to hold no name to learn (an IP address). */
  private unlearnable: string | undefined;

  private learnHost(req: IncomingMessage) {
    if (this.learnedName !== undefined || this.config.proxy.name !== '') return;
    const raw = req.headers.host;
    if (raw !== undefined && raw === this.unlearnable) return;
    // Only a DNS name: never an address, user info or a URL.
    const host = hostOf(req);
    if (host === undefined) {
      this.unlearnable = raw;
      return;
    }
    this.learnedName = host;
    this.onFirstHost?.(host);
  }
}
