/**
 * The one decision path of a forwarded request, ordinary or upgrade (websocket): the route for its
 * canonical path and Host, who it is for and whether that may pass, then what goes upstream (the
 * request line and header lines, its access-check URL, the cookies to set on the answer). The
 * two entry points (src/proxy/server.ts) differ only in how they answer: a ServerResponse with
 * the error page, or a raw socket.
 */
import type { IncomingMessage } from 'node:http';
import { type RouteSettings, routeFor } from '../config/routing.js';
import type { AccessRecord } from './accesslog.js';
import type { AssertionSigner } from './assertion.js';
import { COOKIE_NAME } from './cookie.js';
import { type InFlight, newToken } from './endpoints.js';
import { upstreamHeaders } from './headers.js';
import type { AuthOutcome, IdentityResolver } from './identity.js';
import { type Listener, originOf } from './origin.js';
import type { ProxySnapshot } from './snapshot.js';
import type { UpstreamTarget } from './upstream/request.js';

/** A request's canonical path and its query ("" or from "?"): src/proxy/http.ts requestTarget. */
export interface Target {
  path: string;
  query: string;
}

/** What was decided for a request: its route and who it is for (or why it is refused). */
export interface Decided {
  route: RouteSettings;
  auth: AuthOutcome;
}

/** A request allowed through, ready to go upstream. */
export interface ForwardPlan {
  target: UpstreamTarget;
  /** The request line and header lines, each ending in CRLF (no framing headers, no blank line). */
  head: string;
  /** Cookies to set on the answer (a renewed session, a cleared one); undefined: none. */
  cookies: string[] | undefined;
  /** The access-check URL's token: removed from the requests in flight when the exchange ends. */
  token: string;
}

export interface DecisionOptions {
  identity: IdentityResolver;
  /** Signs X-Service-Assertion (src/proxy/assertion.ts). */
  assertions: AssertionSigner;
  /** The requests in flight, by access-check token: a plan adds its own. */
  inflight: Map<string, InFlight>;
  listener: Listener;
}

export class RequestDecision {
  constructor(private readonly o: DecisionOptions) {}

  /**
   * The route and the authentication of a request: synchronous when the credential is cached
   * (the common case: no promise per request), else a promise.
   */
  decide(
    req: IncomingMessage,
    snapshot: ProxySnapshot,
    rec: AccessRecord,
    { path }: Target,
  ): Decided | Promise<Decided> {
    const route = routeFor(snapshot.config, path, snapshot.routes.defaultsFor(req.headers.host));
    rec.mode = route.auth;
    const auth = this.o.identity.authenticate(req, route.auth, snapshot);
    if (auth instanceof Promise) return auth.then((a) => ({ route, auth: a }));
    return { route, auth };
  }

  /**
   * What goes upstream for a request allowed through; notes the user and upstream in the access
   * record and registers the request's access-check URL (the caller removes it when the exchange
   * ends). `websocket` asks the upstream to switch to websocket.
   */
  plan(
    req: IncomingMessage,
    snapshot: ProxySnapshot,
    rec: AccessRecord,
    { path, query }: Target,
    route: RouteSettings,
    auth: Extract<AuthOutcome, { ok: true }>,
    websocket: boolean,
  ): ForwardPlan {
    const who = auth.who;
    if (who) {
      rec.user = who.identity.UserID;
      rec.authType = who.authType;
    }
    rec.upstream = route.upstream;
    const token = newToken();
    const origin = originOf(req, snapshot, this.o.listener);
    this.o.inflight.set(token, { identity: who?.identity, origin });
    const up = snapshot.upstream(route.upstream);
    let head = `${req.method} ${up.base}${path}${query} HTTP/1.1\r\n${upstreamHeaders(req, auth, token, snapshot.privateBase || origin, up.target, this.o.listener.secure, this.o.assertions, snapshot.assertionKey)}`;
    if (websocket) head += 'connection: Upgrade\r\nupgrade: websocket\r\n';
    // Cookies to set on the response: none on the common request.
    const cookies =
      who?.setCookie || auth.clearCookie
        ? [
            ...(who?.setCookie ? [who.setCookie] : []),
            ...(auth.clearCookie ? [this.o.identity.cookie(snapshot, COOKIE_NAME, '', 0)] : []),
          ]
        : undefined;
    return { target: up.target, head, cookies, token };
  }
}
