// The one class every request passes through: it holds the current snapshot of the settings
// (src/proxy/snapshot.ts) and the long-lived parts (identity, endpoints, upstream pool), and
// answers requests and upgrades through the one decision path of src/proxy/decision.ts.
import type { KeyObject } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ProxyConfig } from '../config/proxy.js';
import { declaresBody } from '../core/unusedbody.js';
import { PROXY_PATHS } from '../wire/proxy.js';
import { AccessLog, type AccessRecord, type AccessSink } from './accesslog.js';
import { AssertionSigner } from './assertion.js';
import type { AuthBackend } from './backend.js';
import { BodyWatch } from './body.js';
import type { CookieSigner } from './cookie.js';
import type { ApiKeyCache } from './credentials.js';
import { type Decided, RequestDecision, type Target } from './decision.js';
import { type InFlight, ProxyEndpoints } from './endpoints.js';
import { HttpError, proxyError, upstreamError } from './errorcodes.js';
import { rawResponse, sendError } from './errors.js';
import { ForwardAuth, RefusedError } from './forwardauth.js';
import type { Learned } from './hosts.js';
import { continueIfExpected, redact, requestTarget } from './http.js';
import { type AuthOutcome, IdentityResolver } from './identity.js';
import { callbackOrigin, FirstHost, type Listener, originOf } from './origin.js';
import { Readiness } from './readiness.js';
import { refusal } from './refusal.js';
import { Relay } from './relay.js';
import { buildSnapshot, type ProxySnapshot } from './snapshot.js';
import { isWebsocketUpgrade, rawError, UpgradeRelay } from './upgrade.js';
import { UpstreamPool } from './upstream/pool.js';

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
export class AccessProxy implements Listener {
  /**
   * The settings and all derived from them, swapped whole (setConfig, setLearned). A request reads
   * it once, at its start (handler, upgrade), and passes that object along to its end.
   */
  private snapshot: ProxySnapshot;
  readonly appId: string | undefined;
  readonly keys: ApiKeyCache;
  readonly signer: CookieSigner;
  /** Whether clients reach this proxy over TLS (cookies get Secure, URLs https). */
  readonly secure: boolean;
  /** Who requests are for: API keys, session cookies, the sign-in handshake (src/proxy/identity.ts). */
  private readonly identity: IdentityResolver;
  /** Route, authenticate, authorize and build the upstream request (src/proxy/decision.ts). */
  private readonly decision: RequestDecision;
  /** The proxy's own endpoints under /.gatehouse/ (src/proxy/endpoints.ts). */
  private readonly endpoints: ProxyEndpoints;
  private readonly pool: UpstreamPool;
  private readonly inflight = new Map<string, InFlight>();
  /** Signs X-Service-Assertion and serves its keys (src/proxy/assertion.ts). */
  readonly assertions: AssertionSigner;
  /** The last response started on each client connection (pipelined responses go out in order). */
  private readonly lastResponse = new WeakMap<object, ServerResponse>();
  private readonly log: Logger;
  /** The first request's host name, when proxy.name is unset (src/proxy/origin.ts). */
  readonly firstHost = new FirstHost();
  /** Set when the proxy serves TLS: does it hold a certificate for this (lower-case) name? */
  holdsCertificateFor: ((name: string) => boolean) | undefined;
  /** Answers nginx's, Traefik's and Caddy's forward-auth subrequests (src/proxy/forwardauth.ts). */
  private readonly forwardAuth: ForwardAuth;
  private readonly accessLog: AccessLog;
  /** Request bodies being read or streamed, watched for a minimum rate (src/proxy/body.ts). */
  private readonly bodies: BodyWatch;
  /** Whether the service answers, for the health endpoint (src/proxy/readiness.ts). */
  readonly readiness: Readiness;

  constructor(private readonly opts: ProxyOptions) {
    this.secure = opts.secure;
    this.log = opts.logger;
    this.accessLog = new AccessLog(opts.accessLogger === undefined ? opts.logger : opts.accessLogger);
    this.identity = new IdentityResolver({
      token: opts.config.auth.token,
      backend: opts.backend,
      logger: opts.logger,
      cookieKey: opts.cookieKey,
      secure: opts.secure,
      cookieTtlS: opts.cookieTtlS,
      originOf: (req, snapshot) => originOf(req, snapshot, this),
    });
    this.appId = this.identity.appId;
    this.keys = this.identity.keys;
    this.signer = this.identity.signer;
    this.assertions = new AssertionSigner(opts.config.proxy.assertionkey, this.appId ?? '');
    this.snapshot = buildSnapshot(opts.config, undefined, this.assertions.signingKey, opts);
    const stallMs = this.snapshot.bodyLimits.stallMs;
    this.bodies = new BodyWatch(Math.max(50, Math.min(1_000, Math.floor(stallMs / 4))));
    this.decision = new RequestDecision({
      identity: this.identity,
      assertions: this.assertions,
      inflight: this.inflight,
      listener: this,
    });
    this.endpoints = new ProxyEndpoints({
      assertions: this.assertions,
      identity: this.identity,
      backend: opts.backend,
      inflight: this.inflight,
      bodyIdleTimeoutMs: opts.bodyIdleTimeoutMs,
      originOf: (req, snapshot) => originOf(req, snapshot, this),
      callbackOrigin: (req, snapshot) => callbackOrigin(req, snapshot, this),
    });
    this.forwardAuth = new ForwardAuth({ identity: this.identity, assertions: this.assertions });
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

  /** The snapshot new requests get (src/proxy/snapshot.ts): never changed, only replaced. */
  get current(): ProxySnapshot {
    return this.snapshot;
  }

  /** Replaces the settings (SIGHUP); requests in flight keep the snapshot they started with. */
  setConfig(config: ProxyConfig) {
    const keyProblem = this.assertions.reload(config.proxy.assertionkey);
    if (keyProblem)
      this.log.error(
        { reason: keyProblem.message },
        'proxy.assertionkey could not be read: keeping the old key',
      );
    const key = this.assertions.signingKey;
    this.snapshot = buildSnapshot(config, this.snapshot.learned, key, this.opts, this.snapshot);
  }

  /** What the service said at the last registration (for health reports and tests). */
  get learnedNow(): Learned | undefined {
    return this.snapshot.learned;
  }

  /** Takes what the service said at registration: requests from now on route by it. */
  setLearned(learned: Learned) {
    const { config, assertionKey } = this.snapshot;
    this.snapshot = buildSnapshot(config, learned, assertionKey, this.opts, this.snapshot);
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

  // ---- requests -----------------------------------------------------------------------------

  readonly handler = (req: IncomingMessage, res: ServerResponse) => {
    const snapshot = this.snapshot;
    this.lastResponse.set(req.socket, res);
    const rec = this.accessLog.start(req, res);
    // Synchronous when the credential is cached (the common case): no promise per request.
    try {
      const pending = this.handle(req, res, rec, snapshot);
      if (pending) pending.catch((e: unknown) => this.fail(req, res, e, snapshot));
    } catch (e) {
      this.fail(req, res, e, snapshot);
    }
  };

  private handle(
    req: IncomingMessage,
    res: ServerResponse,
    rec: AccessRecord,
    snapshot: ProxySnapshot,
  ): Promise<void> | undefined {
    const target = requestTarget(req.url);
    this.firstHost.learn(req, snapshot);
    if (target.path.startsWith(PROXY_PATHS.base)) return this.internal(req, res, rec, target, snapshot);
    const decided = this.decision.decide(req, snapshot, rec, target);
    if (decided instanceof Promise)
      return decided.then((d) => this.forward(req, res, rec, snapshot, target, d));
    this.forward(req, res, rec, snapshot, target, decided);
    return undefined;
  }

  /** The proxy's own paths: forward auth and health here, the others in endpoints.ts. */
  private internal(
    req: IncomingMessage,
    res: ServerResponse,
    rec: AccessRecord,
    { path, query }: Target,
    snapshot: ProxySnapshot,
  ): Promise<void> | undefined {
    if (path === PROXY_PATHS.authRequest || path === PROXY_PATHS.forwardAuth) {
      const kind = path === PROXY_PATHS.authRequest ? 'auth-request' : 'forward-auth';
      return this.forwardAuth.answerFor(req, res, kind, rec, snapshot);
    }
    if (path === PROXY_PATHS.health) return this.readiness.answer(req, res);
    return this.endpoints.internal(req, res, path, query, snapshot);
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    rec: AccessRecord,
    snapshot: ProxySnapshot,
    target: Target,
    { route, auth }: Decided,
  ) {
    if (!auth.ok) return this.refuse(req, res, auth, snapshot);
    // Authentication may have waited on the service. A client gone meanwhile has had its 'close'
    // already: nothing would ever end the exchange or invalidate its access-check URL.
    if (res.destroyed) return;
    const plan = this.decision.plan(req, snapshot, rec, target, route, auth, false);
    const relay = new Relay(res, plan.cookies, (e) => this.fail(req, res, e, snapshot));
    const length = req.headers['content-length'];
    const contentLength = length === undefined ? undefined : Number(length);
    const send = (body: Readable | null) => {
      if (res.destroyed) return;
      relay.exchange = this.pool.request(
        {
          target: plan.target,
          method: req.method ?? 'GET',
          head: plan.head,
          body,
          // Node has checked Content-Length; a body without one is sent chunked.
          contentLength,
        },
        relay,
      );
    };
    res.once('close', () => {
      this.inflight.delete(plan.token);
      if (!res.writableFinished) relay.exchange?.abort();
    });
    if (!declaresBody(req)) return send(null);
    continueIfExpected(req, res);
    // The body's first part is read here at an acceptable rate before a connection is taken
    // (src/proxy/body.ts): a trickling client holds no upstream connection.
    this.bodies
      .gate(req, contentLength, snapshot.bodyLimits, (e) => {
        relay.exchange?.abort();
        this.slowBody(req, res, e, snapshot);
      })
      .then(send, (e: unknown) => this.slowBody(req, res, e, snapshot));
  }

  /** A body too slow (408) or cut off: answered, and the connection closed (the rest never comes). */
  private slowBody(req: IncomingMessage, res: ServerResponse, e: unknown, snapshot: ProxySnapshot) {
    if (!res.headersSent) res.shouldKeepAlive = false;
    this.fail(req, res, e, snapshot);
  }

  // ---- upgrades -----------------------------------------------------------------------------

  readonly upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const snapshot = this.snapshot;
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
      ? turn.then(() => (socket.destroyed ? undefined : this.handleUpgrade(req, socket, head, rec, snapshot)))
      : this.handleUpgrade(req, socket, head, rec, snapshot);
    handled.catch((e: unknown) => {
      const err = e instanceof HttpError ? e : upstreamError(e);
      rec.status = err.status;
      if (!(e instanceof HttpError)) this.log.warn({ err: String(e) }, 'websocket upgrade failed');
      rawError(socket, err);
    });
  };

  /**
   * An upgrade request, decided like any request. A websocket handshake goes upstream asking for
   * websocket and becomes a tunnel only on a 101 naming it; any other Upgrade is forwarded as an
   * ordinary request without it. Either way a non-101 answer is relayed and the client
   * connection closed (src/proxy/upgrade.ts).
   */
  private async handleUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    rec: AccessRecord,
    snapshot: ProxySnapshot,
  ) {
    const target = requestTarget(req.url);
    this.firstHost.learn(req, snapshot);
    if (target.path.startsWith(PROXY_PATHS.base)) throw proxyError('NoWebsocketHere');
    // Node passes the body of an upgrade request on unframed, as if it were tunnel data.
    if (declaresBody(req)) throw proxyError('UpgradeWithBody');
    const { route, auth } = await this.decision.decide(req, snapshot, rec, target);
    if (!auth.ok) {
      rec.status = auth.status;
      rec.error = auth.code;
      rawResponse(
        socket,
        auth.status,
        { 'content-type': 'text/plain; charset=utf-8', 'x-error-code': auth.code, ...auth.headers },
        `${auth.message}\n`,
      );
      return;
    }
    if (socket.destroyed) return;
    const websocket = isWebsocketUpgrade(req);
    const plan = this.decision.plan(req, snapshot, rec, target, route, auth, websocket);
    const relay = new UpgradeRelay(socket, plan.cookies, () => this.inflight.delete(plan.token), this.log);
    relay.start(
      this.pool,
      {
        target: plan.target,
        method: req.method ?? 'GET',
        head: plan.head,
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
  private refuse(
    req: IncomingMessage,
    res: ServerResponse,
    out: Extract<AuthOutcome, { ok: false }>,
    snapshot: ProxySnapshot,
  ) {
    const r = refusal(out, snapshot.learned);
    sendError(req, res, out.status, out.code, r.message, r.headers, r.detail);
  }

  private fail(req: IncomingMessage, res: ServerResponse, e: unknown, snapshot: ProxySnapshot) {
    if (e instanceof RefusedError && !res.headersSent) return this.refuse(req, res, e.outcome, snapshot);
    const err = e instanceof HttpError ? e : proxyError('Internal');
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
    const appName = snapshot.learned?.appName || undefined;
    sendError(req, res, err.status, err.code, err.message, {}, { appName });
  }
}
