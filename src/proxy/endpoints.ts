/**
 * The proxy's own endpoints under /.gatehouse/ (PROXY_PATHS): the start of sign-in, the callback
 * the service sends the browser back to, the access-check URL an upstream POSTs to while its
 * request is in flight, and the keys that verify X-Service-Assertion.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { limitUnusedBody } from '../core/unusedbody.js';
import { PROXY_PATHS, type WireIdentity } from '../wire/proxy.js';
import type { AssertionSigner } from './assertion.js';
import { type AuthBackend, BackendError } from './backend.js';
import { readCookie, STATE_COOKIE } from './cookie.js';
import { errorFrom, proxyError } from './errorcodes.js';
import { continueIfExpected, readBody, safeReturnPath } from './http.js';
import { type AuthOutcome, type IdentityResolver, refuse } from './identity.js';
import type { ProxySnapshot } from './snapshot.js';

/** A request forwarded and not yet answered, by the token of its access-check URL. */
export interface InFlight {
  identity: WireIdentity | undefined;
  /** Public origin of the request, for relative `next` values and sign-in links. */
  origin: string;
}

/** What the proxy's endpoints need from the proxy around them. */
export interface EndpointOptions {
  /** Serves the keys of X-Service-Assertion at PROXY_PATHS.jwks. */
  assertions: AssertionSigner;
  identity: IdentityResolver;
  backend: AuthBackend;
  /** The requests in flight, by access-check token: the forwarding side adds and removes them. */
  inflight: ReadonlyMap<string, InFlight>;
  /** A form body that pauses this long between two chunks is cut off: 408. */
  bodyIdleTimeoutMs?: number;
  /** The proxy's origin as this request reached it (src/proxy/origin.ts). */
  originOf: (req: IncomingMessage, snapshot: ProxySnapshot) => string;
  /** The origin a callback request came to: the application's behind a trusted front proxy. */
  callbackOrigin: (req: IncomingMessage, snapshot: ProxySnapshot) => string;
}

export class ProxyEndpoints {
  private readonly identity: IdentityResolver;

  constructor(private readonly opts: EndpointOptions) {
    this.identity = opts.identity;
  }

  /** One request to an endpoint; `snapshot` is the request's (src/proxy/snapshot.ts) (src/proxy/snapshot.ts). */
  async internal(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    query: string,
    snapshot: ProxySnapshot,
  ) {
    if (path.startsWith(PROXY_PATHS.accessCheck))
      return this.accessCheck(req, res, path.slice(PROXY_PATHS.accessCheck.length));
    if (path === PROXY_PATHS.callback)
      return this.callback(req, res, new URLSearchParams(query.slice(1)), snapshot);
    if (path === PROXY_PATHS.jwks) {
      limitUnusedBody(req, res);
      if (req.method !== 'GET' && req.method !== 'HEAD') throw proxyError('JwksMethod');
      const body = JSON.stringify(this.opts.assertions.jwks());
      res.writeHead(200, {
        'content-type': 'application/jwk-set+json',
        'cache-control': 'public, max-age=300',
        'content-length': Buffer.byteLength(body),
      });
      return void res.end(req.method === 'HEAD' ? undefined : body);
    }
    if (path === PROXY_PATHS.signin) {
      if (this.identity.tokenProblem)
        return refuse(req, res, this.identity.unavailable() as Extract<AuthOutcome, { ok: false }>);
      const back = new URLSearchParams(query.slice(1)).get('return') ?? '/';
      const { location, setCookie } = this.identity.signinRedirect(
        snapshot,
        this.opts.originOf(req, snapshot),
        back,
      );
      limitUnusedBody(req, res);
      res.writeHead(302, { location, 'set-cookie': setCookie, 'cache-control': 'no-store' });
      return void res.end();
    }
    throw proxyError('NoEndpoint', path);
  }

  /** Back from the service's sign-in: check the state, exchange the one-time code, set our cookie. */
  private async callback(
    req: IncomingMessage,
    res: ServerResponse,
    params: URLSearchParams,
    snapshot: ProxySnapshot,
  ) {
    if (req.method !== 'GET') throw proxyError('CallbackMethod');
    const code = params.get('code') ?? '';
    const state = params.get('state') ?? '';
    const saved = readCookie(req.headers.cookie, STATE_COOKIE) ?? '';
    if (saved === '' && code !== '') return this.retry(req, res, state, snapshot);
    const dot = saved.indexOf('.');
    const savedState = dot < 0 ? '' : saved.slice(0, dot);
    if (code === '' || state === '' || savedState === '' || !constantEqual(state, savedState))
      throw proxyError('SigninLinkInvalid');
    const back = safeReturnPath(Buffer.from(saved.slice(dot + 1), 'base64url').toString('utf8'));
    let identity: WireIdentity;
    try {
      identity = await this.opts.backend.exchangeCode(code);
    } catch (e) {
      if (e instanceof BackendError && e.refused) throw proxyError('SigninCodeInvalid');
      const out = this.identity.backendDown(e) as Extract<AuthOutcome, { ok: false }>;
      throw errorFrom(out);
    }
    const signed = (await this.identity.signer.sign(identity)).token;
    limitUnusedBody(req, res);
    res.writeHead(302, {
      location: back,
      'cache-control': 'no-store',
      'set-cookie': [
        this.identity.sessionCookie(snapshot, signed, identity),
        this.identity.cookie(snapshot, STATE_COOKIE, '', 0, PROXY_PATHS.base),
      ],
    });
    res.end();
  }

  /**
   * A callback without the state cookie: a front proxy that did not pass on the Set-Cookie of the
   * sign-in start, or a link someone else sent (login CSRF). Its code is not used. When the state is
   * this proxy's own first attempt, the sign-in starts again from here, where the state cookie
   * reaches the browser (the service signs a signed-in browser straight back); else 400.
   */
  private retry(req: IncomingMessage, res: ServerResponse, state: string, snapshot: ProxySnapshot) {
    const opened = this.identity.states.open(state);
    if (!opened || opened.retried) throw proxyError(opened ? 'CookieNotKept' : 'SigninLinkInvalid');
    const { location, setCookie } = this.identity.signinRedirect(
      snapshot,
      this.opts.callbackOrigin(req, snapshot),
      opened.back ?? '/',
      true,
    );
    limitUnusedBody(req, res);
    res.writeHead(302, { location, 'set-cookie': setCookie, 'cache-control': 'no-store' });
    res.end();
  }

  /** POST from the upstream while its request is in flight: is the user in these groups? */
  private async accessCheck(req: IncomingMessage, res: ServerResponse, token: string) {
    const entry = this.opts.inflight.get(token);
    if (!entry) throw proxyError('AccessCheckGone');
    if (req.method !== 'POST') throw proxyError('AccessCheckMethod');
    const type = String(req.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim()
      .toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') throw proxyError('AccessCheckMediaType');
    continueIfExpected(req, res);
    const form = new URLSearchParams(await readBody(req, 65_536, this.opts.bodyIdleTimeoutMs ?? 30_000));
    const groups = form.getAll('group').map((g) => g.trim());
    const op = form.get('op') ?? 'and';
    if (op !== 'and' && op !== 'or') throw proxyError('AccessCheckOp');
    if (groups.length === 0 || groups.some((g) => !/^[A-Za-z0-9_-]{1,64}$/.test(g)) || groups.length > 64)
      throw proxyError('AccessCheckGroups');
    let next = form.get('next') ?? '';
    try {
      next = next === '' ? `${entry.origin}/` : new URL(next, `${entry.origin}/`).toString();
    } catch {
      throw proxyError('AccessCheckNext');
    }
    let status: number;
    let location: string | undefined;
    let body: { GroupID: string; StatusCode: number; Location?: string }[];
    if (!entry.identity) {
      const nextUrl = new URL(next);
      const signin =
        nextUrl.origin === entry.origin
          ? `${entry.origin}${PROXY_PATHS.signin}?${new URLSearchParams({ return: safeReturnPath(nextUrl.pathname + nextUrl.search) })}`
          : `${entry.origin}${PROXY_PATHS.signin}`;
      status = 403;
      location = signin;
      body = groups.map((g) => ({ GroupID: g, StatusCode: 401, Location: signin }));
    } else {
      if (this.identity.tokenProblem)
        throw proxyError('AccessCheckNotAuthorized', this.identity.tokenProblem);
      try {
        const r = await this.opts.backend.accessCheck({
          UserID: entry.identity.UserID,
          Groups: groups,
          Op: op,
          Next: next,
        });
        status = r.Satisfied ? 200 : 403;
        location = r.Satisfied ? undefined : r.Location;
        body = r.Results;
      } catch (e) {
        const out = this.identity.backendDown(e) as Extract<AuthOutcome, { ok: false }>;
        if (e instanceof BackendError && e.refused) throw proxyError('AccessCheckRefused', e.message);
        throw errorFrom(out);
      }
    }
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'cache-control': 'no-store',
    };
    if (location) headers.location = location;
    res.writeHead(status, headers);
    res.end(JSON.stringify(body));
  }
}

/** Access-check tokens: 192 random bits each, cut from a pooled CSPRNG buffer (one syscall per 256). */
// module-state: true process singleton: the process's pooled CSPRNG bytes for tokens (pool and poolAt).
let pool = Buffer.alloc(0);
// module-state: the read position in the process's pooled CSPRNG bytes above.
let poolAt = 0;
export function newToken(): string {
  if (poolAt + 24 > pool.length) {
    pool = randomBytes(24 * 256);
    poolAt = 0;
  }
  const t = pool.subarray(poolAt, poolAt + 24).toString('base64url');
  pool.fill(0, poolAt, poolAt + 24);
  poolAt += 24;
  return t;
}

function constantEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
