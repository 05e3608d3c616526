import type { KeyObject } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { AuthMode } from '../config/proxy.js';
import {
  APP_REFUSED_CODE,
  BACKCHANNEL,
  PROXY_PATHS,
  PROXY_TOKEN_PATTERN,
  type WireIdentity,
} from '../wire/proxy.js';
import { type AuthBackend, BackendError } from './backend.js';
import { COOKIE_NAME, CookieSigner, cookieHeader, RenewalCache, readCookie, STATE_COOKIE } from './cookie.js';
import { ApiKeyCache, keyInQuery, presentedCredential } from './credentials.js';
import { errorOf } from './errorcodes.js';
import { sendError } from './errors.js';
import { isBrowser, safeReturnPath } from './http.js';
import type { ProxySnapshot } from './snapshot.js';
import { STATE_TTL_S, StateSealer } from './state.js';

export interface Identified {
  identity: WireIdentity;
  authType: 'bearer' | 'session';
  /** A renewed session cookie to set on the response. */
  setCookie?: string;
}

export type AuthOutcome =
  | {
      ok: true;
      who: Identified | undefined;
      clearCookie?: boolean;
      /** Mode `none`: the client's Authorization is the application's (unless it holds our key). */
      appAuthorization?: true;
    }
  | {
      ok: false;
      status: number;
      code: string;
      message: string;
      headers?: Record<string, string>;
      /** The user is known but the App is not open to them (App.AccessGroups). */
      denied?: true;
    };

/**
 * A request as identity resolution reads it: the client's own (inline), or the original request a
 * front proxy describes to the forward-auth endpoints, with the origin the browser used (checked
 * by the caller: src/proxy/forwardauth.ts).
 */
export interface RequestView {
  url?: string;
  method?: string;
  headers: IncomingHttpHeaders;
  /** The public origin the sign-in comes back to; unset: the proxy's own (originOf). */
  origin?: string;
}

/**
 * The service's refusal of a user the App is closed to (App.AccessGroups): the back channel
 * answers 403 with this X-Error-Code (src/api/backchannel.ts, requireAppAccess).
 */
const appClosed = (e: BackendError) => e.code === APP_REFUSED_CODE;

/** What identity resolution needs from the proxy around it. */
export interface IdentityOptions {
  /** auth.token: the App ID in it names this proxy to the service. */
  token: string;
  backend: AuthBackend;
  logger: Logger;
  cookieKey: KeyObject;
  /** Whether clients reach this proxy over TLS (cookies get Secure). */
  secure: boolean;
  /** Lifetime of the signed session cookie (seconds). */
  cookieTtlS?: number;
  /** The proxy's origin as this request reached it: the sign-in callback URL is built from it. */
  originOf: (req: IncomingMessage, snapshot: ProxySnapshot) => string;
}

/**
 * Who a request is for: an API key (`Authorization: Bearer`) or the signed session cookie, from
 * the caches when they know it, else asking the service over the back channel (key lookups,
 * session renewals); and the start of the sign-in handshake that ends with the cookie set.
 */
export class IdentityResolver {
  readonly appId: string | undefined;
  readonly keys: ApiKeyCache;
  readonly signer: CookieSigner;
  /** Renewed session proofs by the expired cookie they replace. */
  private readonly renewals = new RenewalCache();
  private readonly log: Logger;
  /** Set when the service refused our token: requests needing a user fail with this message. */
  tokenProblem: string | undefined;

  constructor(private readonly opts: IdentityOptions) {
    this.log = opts.logger;
    const m = PROXY_TOKEN_PATTERN.exec(opts.token);
    this.appId = m?.[1];
    if (opts.token === '') this.tokenProblem = 'auth.token is not set';
    else if (!m) this.tokenProblem = 'auth.token is not a proxy token (expected gp.<app id>.<secret>)';
    this.keys = new ApiKeyCache(() => opts.backend);
    this.signer = new CookieSigner(opts.cookieKey, `gatehouse-proxy:${this.appId ?? ''}`, opts.cookieTtlS);
    this.states = new StateSealer(opts.cookieKey);
  }

  /** Seals and opens the sign-in state (src/proxy/state.ts). */
  readonly states: StateSealer;

  /**
   * Synchronous for cached API keys and cookies; a promise when the service must be asked.
   * `snapshot` is the request's (src/proxy/snapshot.ts) (src/proxy/snapshot.ts): cookies set take its settings.
   */
  authenticate(
    req: RequestView,
    mode: AuthMode,
    snapshot: ProxySnapshot,
  ): AuthOutcome | Promise<AuthOutcome> {
    if (keyInQuery(req.url)) return { ok: false, ...errorOf('KeyInUrl') };
    if (mode === 'none') return { ok: true, who: undefined, appAuthorization: true };
    const presented = presentedCredential(req.headers.authorization);
    if (presented.kind === 'key') {
      if (this.tokenProblem) return this.unavailable();
      const known = this.keys.lookup(presented.key);
      if (!(known instanceof Promise)) return { ok: true, who: { identity: known, authType: 'bearer' } };
      return this.keyOutcome(known);
    }
    const cookie = readCookie(req.headers.cookie, COOKIE_NAME);
    if (cookie) {
      const proof = this.signer.cached(cookie);
      if (proof) return { ok: true, who: { identity: proof.identity, authType: 'session' } };
      const renewed = this.renewals.get(cookie);
      if (renewed)
        return {
          ok: true,
          who: { identity: renewed.identity, authType: 'session', setCookie: renewed.setCookie },
        };
    }
    return this.authenticateSlow(req, mode, cookie, snapshot);
  }

  private async keyOutcome(pending: Promise<WireIdentity>): Promise<AuthOutcome> {
    try {
      const identity = await pending;
      return { ok: true, who: { identity, authType: 'bearer' } };
    } catch (e) {
      if (e instanceof BackendError && e.refused && appClosed(e)) return this.denied(e);
      if (e instanceof BackendError && e.refused)
        return {
          ok: false,
          ...errorOf('KeyRefused', e.message),
          headers: { 'www-authenticate': 'Bearer realm="gatehouse", error="invalid_token"' },
        };
      return this.backendDown(e);
    }
  }

  /** 403 for a known user the App is closed to: the page links to the access-request page. */
  denied(e: BackendError): Extract<AuthOutcome, { ok: false }> {
    return { ok: false, ...errorOf('AppClosed', e.message), denied: true };
  }

  private async authenticateSlow(
    req: RequestView,
    mode: AuthMode,
    cookie: string | undefined,
    snapshot: ProxySnapshot,
  ): Promise<AuthOutcome> {
    let clearCookie = false;
    if (cookie) {
      const v = await this.signer.verify(cookie);
      if (v.ok) return { ok: true, who: { identity: v.proof.identity, authType: 'session' } };
      if (v.expired) {
        if (this.tokenProblem) return this.unavailable();
        try {
          const r = await this.renewals.renew(cookie, async () => {
            const identity = await this.opts.backend.session(v.sessionId);
            const signed = await this.signer.sign(identity);
            return {
              identity,
              exp: signed.exp,
              setCookie: this.sessionCookie(snapshot, signed.token, identity),
            };
          });
          return { ok: true, who: { identity: r.identity, authType: 'session', setCookie: r.setCookie } };
        } catch (e) {
          if (!(e instanceof BackendError && e.refused)) return this.backendDown(e);
          if (appClosed(e)) return { ...this.denied(e), headers: this.clearing(snapshot) };
        }
      }
      clearCookie = true;
    }
    if (mode === 'optional') return { ok: true, who: undefined, clearCookie };
    if (isBrowser(req)) {
      if (this.tokenProblem) return this.unavailable();
      const { location, setCookie } = this.signinRedirect(
        snapshot,
        req.origin ?? this.opts.originOf(req as IncomingMessage, snapshot),
        req.url ?? '/',
      );
      return {
        ok: false,
        ...errorOf('SignInRequired'),
        headers: { location, 'set-cookie': setCookie, 'cache-control': 'no-store' },
      };
    }
    return {
      ok: false,
      ...errorOf('AuthenticationRequired'),
      headers: { 'www-authenticate': 'Bearer realm="gatehouse", Basic realm="gatehouse"' },
    };
  }

  unavailable(): AuthOutcome {
    return { ok: false, ...errorOf('ProxyNotAuthorized', String(this.tokenProblem)) };
  }

  backendDown(e: unknown): AuthOutcome {
    if (e instanceof BackendError && e.proxyRejected) {
      this.tokenProblem = `the service refused auth.token (${e.message})`;
      this.log.error({ reason: e.message }, 'the service refused auth.token: no user can be authenticated');
      return this.unavailable();
    }
    this.log.warn({ err: String(e) }, 'the service could not be asked');
    return { ok: false, ...errorOf('ServiceUnreachable') };
  }

  /** A Set-Cookie ending the proxy's session cookie. */
  clearing(snapshot: ProxySnapshot): Record<string, string> {
    return { 'set-cookie': this.cookie(snapshot, COOKIE_NAME, '', 0) };
  }

  /**
   * Starts the sign-in handshake: a state cookie here, the browser to the service with the
   * callback URL on `origin` (the service checks it is an origin of the App).
   */
  signinRedirect(snapshot: ProxySnapshot, origin: string, returnTo: string, retried = false) {
    const back = safeReturnPath(returnTo);
    const state = this.states.seal(back, retried);
    const callback = `${origin}${PROXY_PATHS.callback}`;
    const params = new URLSearchParams({ app: this.appId ?? '', state, return: callback });
    const location = `${this.opts.backend.publicUrl}${BACKCHANNEL}/signin?${params}`;
    const setCookie = this.cookie(
      snapshot,
      STATE_COOKIE,
      `${state}.${Buffer.from(back).toString('base64url')}`,
      STATE_TTL_S,
      PROXY_PATHS.base,
    );
    return { location, setCookie };
  }

  /** A Set-Cookie with the request's settings (proxy.cookiedomain). */
  cookie(snapshot: ProxySnapshot, name: string, value: string, maxAge: number, path = '/') {
    return cookieHeader(name, value, {
      maxAge,
      secure: this.opts.secure,
      domain: snapshot.config.proxy.cookiedomain,
      path,
    });
  }

  /** The session cookie lives as long as the service session; the proof inside expires much sooner. */
  sessionCookie(snapshot: ProxySnapshot, signed: string, identity: WireIdentity) {
    const until = identity.Expires ? Date.parse(identity.Expires) : Date.now() + 86_400_000;
    return this.cookie(snapshot, COOKIE_NAME, signed, Math.max(1, Math.floor((until - Date.now()) / 1000)));
  }
}

/** The body of a refused request is not forwarded: sendError reads at most a bounded part of it. */
export function refuse(req: IncomingMessage, res: ServerResponse, out: Extract<AuthOutcome, { ok: false }>) {
  sendError(req, res, out.status, out.code, out.message, out.headers);
}
