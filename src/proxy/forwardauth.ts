/**
 * Forward auth: the proxy answering for a front proxy (nginx auth_request, Traefik forwardAuth,
 * Caddy forward_auth) whether a request it holds may pass, and as whom. The front proxy describes
 * the original request in headers; only front proxies listed in proxy.trustedproxies are believed
 * (anyone else could name any host and path). The answer is 200 with the identity headers, which
 * the front proxy copies onto the request it forwards, or a refusal it relays (docs/proxy.md).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthMode } from '../config/proxy.js';
import { routeFor } from '../config/routing.js';
import { limitUnusedBody } from '../core/unusedbody.js';
import { ASSERTION_HEADER, type WireIdentity } from '../wire/proxy.js';
import type { AccessRecord } from './accesslog.js';
import type { AssertionSigner } from './assertion.js';
import { forwardableAuthorization } from './credentials.js';
import { HttpError, proxyError } from './errorcodes.js';
import { httpOrigin, plainHostName } from './hosts.js';
import { headerText, requestTarget } from './http.js';
import type { AuthOutcome, Identified, IdentityResolver, RequestView } from './identity.js';
import type { ProxySnapshot } from './snapshot.js';

/** The two dialects: nginx's (X-Original-URL, X-Original-Method) and Traefik's and Caddy's (X-Forwarded-*). */
export type ForwardAuthKind = 'auth-request' | 'forward-auth';

/** The original request as the front proxy describes it. */
export interface OriginalRequest extends RequestView {
  url: string;
  method: string;
  origin: string;
  /** The Host the browser used (name[:port]), for VirtualHost routing. */
  host: string;
  /** The canonical path the mode is decided for. */
  path: string;
}

/** What forward auth needs from the proxy around it. */
export interface ForwardAuthOptions {
  identity: IdentityResolver;
  assertions: AssertionSigner;
}

/** What one forward-auth answer was, for the access log. */
export interface ForwardAuthResult {
  mode: AuthMode | undefined;
  outcome: AuthOutcome | undefined;
  host: string | undefined;
  path: string | undefined;
}

const single = (v: string | string[] | undefined): string | undefined =>
  Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;

const METHOD = /^[A-Z][A-Z0-9_-]{0,31}$/;
const NONE: ReadonlySet<string> = new Set();

/**
 * Reads the original request from a trusted front proxy's headers. Throws HttpError 400 for a
 * description the proxy cannot decide on (missing, repeated, malformed, a path without a
 * canonical form): never a guess.
 */
export function originalRequest(req: IncomingMessage, kind: ForwardAuthKind): OriginalRequest {
  const h = req.headers;
  let scheme: string;
  let authority: string;
  let target: string;
  let method: string | undefined;
  if (kind === 'auth-request') {
    const url = single(h['x-original-url']);
    method = single(h['x-original-method']);
    const m = url === undefined ? null : /^(https?):\/\/([^/?#\s]+)(\S*)$/i.exec(url);
    if (!m) throw proxyError('OriginalUrlMissing');
    scheme = (m[1] as string).toLowerCase();
    authority = m[2] as string;
    target = m[3] === '' ? '/' : (m[3] as string);
  } else {
    const proto = single(h['x-forwarded-proto'])?.toLowerCase();
    const host = single(h['x-forwarded-host']);
    method = single(h['x-forwarded-method']);
    const uri = single(h['x-forwarded-uri']);
    if ((proto !== 'http' && proto !== 'https') || host === undefined || uri === undefined)
      throw proxyError('ForwardedHeadersMissing');
    scheme = proto;
    authority = host;
    target = uri === '' ? '/' : uri;
  }
  if (method === undefined || !METHOD.test(method)) throw proxyError('OriginalMethodBad');
  if (authority.includes('@') || /[\s/\\?#]/.test(authority)) throw proxyError('OriginalHostBad');
  const origin = httpOrigin(`${scheme}://${authority}/`);
  if (origin === undefined) throw proxyError('OriginalHostBad');
  const { path, query } = requestTarget(target);
  return {
    url: path + query,
    method,
    origin,
    host: authority,
    path,
    headers: h,
  };
}

export class ForwardAuth {
  constructor(private readonly o: ForwardAuthOptions) {}

  /**
   * Answers one forward-auth request and notes in the access record what was decided. `snapshot` is
   * the request's (src/proxy/snapshot.ts).
   */
  answerFor(
    req: IncomingMessage,
    res: ServerResponse,
    kind: ForwardAuthKind,
    rec: AccessRecord,
    snapshot: ProxySnapshot,
  ): Promise<void> | undefined {
    const note: ForwardAuthResult = { mode: undefined, outcome: undefined, host: undefined, path: undefined };
    const noted = () => {
      rec.mode = note.mode ?? null;
      if (note.host !== undefined) rec.host = note.host;
      if (note.path !== undefined) rec.url = note.path;
      if (note.outcome?.ok && note.outcome.who) {
        rec.user = note.outcome.who.identity.UserID;
        rec.authType = note.outcome.who.authType;
      }
    };
    try {
      const pending = this.handle(req, res, kind, note, snapshot);
      if (!pending) return void noted();
      return pending.finally(noted);
    } catch (e) {
      noted();
      throw e;
    }
  }

  /**
   * Answers one forward-auth request (GET or HEAD; its body is never read). `done` receives what
   * was decided, for the access log.
   */
  handle(
    req: IncomingMessage,
    res: ServerResponse,
    kind: ForwardAuthKind,
    note: ForwardAuthResult,
    snapshot: ProxySnapshot,
  ): Promise<void> | undefined {
    limitUnusedBody(req, res);
    if (!snapshot.trusted.matches(req.socket.remoteAddress)) throw proxyError('UntrustedFrontProxy');
    if (req.method !== 'GET' && req.method !== 'HEAD') throw proxyError('ForwardAuthMethod');
    const original = originalRequest(req, kind);
    note.host = original.host;
    note.path = original.path;
    // The sign-in comes back to the original origin: only to one the App is served on, when the
    // service has said which (else the service refuses a callback URL on any other origin).
    // The origins the App is served on, from the service; empty: not told (the service checks).
    const origins = snapshot.learned?.origins ?? NONE;
    const name = plainHostName(original.host);
    if (
      origins.size > 0 &&
      !origins.has(original.origin) &&
      !(name !== undefined && snapshot.routes.serves(name))
    )
      throw proxyError('OriginalHostNotServed');
    const route = routeFor(snapshot.config, original.path, snapshot.routes.defaultsFor(original.host));
    note.mode = route.auth;
    const auth = this.o.identity.authenticate(original, route.auth, snapshot);
    if (auth instanceof Promise)
      return auth.then((a) => {
        note.outcome = a;
        this.answer(req, res, kind, a, snapshot);
      });
    note.outcome = auth;
    this.answer(req, res, kind, auth, snapshot);
    return undefined;
  }

  private answer(
    req: IncomingMessage,
    res: ServerResponse,
    kind: ForwardAuthKind,
    auth: AuthOutcome,
    snapshot: ProxySnapshot,
  ) {
    if (res.destroyed) return;
    if (auth.ok) {
      const h: Record<string, string | string[]> = { 'cache-control': 'no-store', 'content-length': '0' };
      if (auth.who) {
        Object.assign(h, identityResponseHeaders(auth.who.identity, auth.who.authType));
        h[ASSERTION_HEADER] = this.o.assertions.assertion(
          auth.who.identity,
          auth.who.authType,
          snapshot.assertionKey,
        );
        if (auth.who.setCookie) h['set-cookie'] = auth.who.setCookie;
      } else {
        // The front proxy replaces Authorization with the answer's: give back the client's own
        // when the inline proxy would forward it (the application's tokens), never one of ours.
        const own = single(req.headers.authorization);
        if (own && forwardableAuthorization(own, auth.appAuthorization ? 'none' : 'optional'))
          h.authorization = own;
      }
      res.writeHead(200, h);
      res.end();
      return;
    }
    // Refusals are thrown to the caller, which sends them with the error page (sendError).
    // nginx's auth_request takes only 2xx, 401 and 403: the sign-in redirect is a 401 there.
    const status = auth.status === 302 && kind === 'auth-request' ? 401 : auth.status;
    throw new RefusedError({ ...auth, status });
  }
}

/** A refusal of the original request, with its outcome (headers, denied) for the error page. */
export class RefusedError extends HttpError {
  constructor(readonly outcome: Extract<AuthOutcome, { ok: false }>) {
    super(outcome.status, outcome.code, outcome.message);
  }
}

/** The identity response headers of an identity, per auth type, made once per identity object. */
// module-state: a side table on each identity object (its response headers, made once); gone with the identity.
const responseHeaderCache = new WeakMap<WireIdentity, Record<string, Record<string, string>>>();

/**
 * The identity headers as response headers for the front proxy to copy (auth_request_set,
 * authResponseHeaders, copy_headers): the same names and values the inline proxy forwards.
 */
export function identityResponseHeaders(
  id: WireIdentity,
  authType: Identified['authType'],
): Record<string, string> {
  let byType = responseHeaderCache.get(id);
  if (!byType) {
    byType = {};
    responseHeaderCache.set(id, byType);
  }
  let h = byType[authType];
  if (!h) {
    const email = headerText(id.Email);
    h = {
      'x-service-user-name': headerText(id.UserName),
      'x-service-email': email,
      'x-service-full-name': headerText(id.FullName),
      'x-service-user': headerText(id.UserID),
      ...(id.Expires ? { 'x-service-session-expires': new Date(id.Expires).toUTCString() } : {}),
      'x-service-auth-type': authType,
      'x-remote-user': email,
      authorization: `Basic ${Buffer.from(`${id.Email}:`, 'utf8').toString('base64')}`,
    };
    byType[authType] = h;
  }
  return h;
}

/** For tests: the names of the identity headers forward auth answers with. */
export const IDENTITY_RESPONSE_HEADERS = [
  'x-service-user-name',
  'x-service-email',
  'x-service-full-name',
  'x-service-user',
  'x-service-session-expires',
  'x-service-auth-type',
  'x-remote-user',
  'authorization',
  ASSERTION_HEADER,
] as const;
