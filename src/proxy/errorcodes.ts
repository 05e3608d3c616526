/**
 * Every answer the proxy gives itself instead of forwarding, defined once: its HTTP status, the
 * stable X-Error-Code value and the message. The codes are the service's phrases
 * (src/core/errors.ts) where the meaning is the same, so a client matches one set of codes;
 * `Proxy Not Authorized` and `Sign In Required` are the proxy's own. Never rename a code: clients
 * match on it. docs/api.md ("The access proxy's errors") lists every status and code, and
 * test/proxy/errorcodes.test.ts checks it does and that no error is made anywhere else.
 */
import type { UpstreamError } from './upstream/request.js';

/** One kind of error: a message with a blank takes the detail (a path, a limit, a reason). */
interface ErrorEntry {
  readonly status: number;
  readonly code: string;
  readonly message: string | ((detail: string) => string);
}

export const PROXY_ERRORS = {
  // The request itself (src/proxy/http.ts, body.ts)
  TargetFragment: { status: 400, code: 'Bad Request', message: '"#" is not allowed in a request target' },
  TargetNotPath: { status: 400, code: 'Bad Request', message: 'the request target must be a path' },
  /** The path has no canonical form (src/core/path.ts); the detail says why. */
  PathNotCanonical: { status: 400, code: 'Bad Request', message: (why: string) => why },
  BodyCutOff: { status: 400, code: 'Bad Request', message: 'the request body was cut off' },
  /** The body came slower than proxy.bodyminrate or stalled (src/proxy/body.ts); the detail says which. */
  BodyTooSlow: { status: 408, code: 'Request Timeout', message: (why: string) => why },
  /** The upstream pool gave up waiting for the rest of a body it was sending. */
  BodyStoppedArriving: { status: 408, code: 'Request Timeout', message: 'the request body stopped arriving' },
  FormStalled: { status: 408, code: 'Request Timeout', message: 'the request body stopped coming' },
  FormTooLarge: {
    status: 413,
    code: 'Payload Too Large',
    message: (limit: string) => `the form may be at most ${limit} bytes`,
  },
  /** The request head did not arrive within the headers timeout (slow loris): raw, from Node's clientError. */
  HeadTimeout: { status: 408, code: 'Request Timeout', message: 'the request head did not arrive in time' },
  /** Node's parser refused the request head: raw, from Node's clientError. */
  MalformedRequest: { status: 400, code: 'Bad Request', message: 'the request is not valid HTTP/1.1' },

  // Upgrades (src/proxy/upgrade.ts)
  NoWebsocketHere: { status: 404, code: 'Not Found', message: 'no websocket here' },
  UpgradeWithBody: { status: 400, code: 'Bad Request', message: 'an upgrade request cannot have a body' },
  EarlyDataTooLarge: {
    status: 400,
    code: 'Bad Request',
    message: 'too much data was sent before the upgrade was accepted',
  },
  UpstreamSwitchedProtocol: {
    status: 502,
    code: 'Bad Gateway',
    message: 'the application switched to a protocol the proxy does not relay',
  },

  // Who the request is for (src/proxy/identity.ts)
  KeyInUrl: {
    status: 400,
    code: 'Bad Request',
    message: 'an API key in the URL is not accepted here: send it as "Authorization: Bearer <key>"',
  },
  KeyRefused: {
    status: 401,
    code: 'Unauthenticated',
    message: (why: string) => `the API key was refused: ${why}`,
  },
  AuthenticationRequired: {
    status: 401,
    code: 'Unauthenticated',
    message: 'authentication required: sign in, or send an API key as "Authorization: Bearer <key>"',
  },
  /** A browser is sent to sign in (302 to the service); a front proxy's auth_request sees a 401. */
  SignInRequired: { status: 302, code: 'Sign In Required', message: 'sign in to continue' },
  /** The user is known but the App is closed to them (App.AccessGroups); the detail is the service's. */
  AppClosed: { status: 403, code: 'Forbidden', message: (why: string) => why },
  ProxyNotAuthorized: {
    status: 503,
    code: 'Proxy Not Authorized',
    message: (why: string) => `this proxy cannot authenticate users: ${why}`,
  },
  ServiceUnreachable: {
    status: 503,
    code: 'Service Unavailable',
    message: 'the identity service cannot be reached',
  },

  // The proxy's endpoints under /.gatehouse/ (src/proxy/endpoints.ts)
  NoEndpoint: { status: 404, code: 'Not Found', message: (path: string) => `no proxy endpoint ${path}` },
  JwksMethod: { status: 405, code: 'Method Not Allowed', message: 'the key set is read with GET' },
  CallbackMethod: { status: 405, code: 'Method Not Allowed', message: 'use GET' },
  SigninLinkInvalid: {
    status: 400,
    code: 'Bad Request',
    message: 'this sign-in link is not for this browser or has expired; start again',
  },
  SigninCodeInvalid: {
    status: 400,
    code: 'Bad Request',
    message: 'the sign-in code is invalid or was already used; start again',
  },
  CookieNotKept: {
    status: 400,
    code: 'Bad Request',
    message: 'this browser did not keep the sign-in cookie: allow cookies for this site and start again',
  },
  AccessCheckGone: {
    status: 404,
    code: 'Not Found',
    message: 'this access-check URL is not valid (its request has completed)',
  },
  AccessCheckMethod: {
    status: 405,
    code: 'Method Not Allowed',
    message: 'POST a form to the access-check URL',
  },
  AccessCheckMediaType: {
    status: 415,
    code: 'Unsupported Media Type',
    message: 'send application/x-www-form-urlencoded',
  },
  AccessCheckOp: { status: 400, code: 'Bad Request', message: 'op must be "and" or "or"' },
  AccessCheckGroups: {
    status: 400,
    code: 'Bad Request',
    message: 'give 1 to 64 group values, each a group ID',
  },
  AccessCheckNext: { status: 400, code: 'Bad Request', message: 'next is not a URL' },
  /** The service refused the access check's question; the detail is its message. */
  AccessCheckRefused: { status: 400, code: 'Bad Request', message: (why: string) => why },
  /** An access check while the service refuses auth.token; the detail is why. */
  AccessCheckNotAuthorized: { status: 503, code: 'Proxy Not Authorized', message: (why: string) => why },

  // Forward auth (src/proxy/forwardauth.ts)
  UntrustedFrontProxy: {
    status: 403,
    code: 'Forbidden',
    message: 'forward auth answers only the front proxies listed in proxy.trustedproxies',
  },
  ForwardAuthMethod: { status: 405, code: 'Method Not Allowed', message: 'forward auth is asked with GET' },
  OriginalUrlMissing: {
    status: 400,
    code: 'Bad Request',
    message: 'X-Original-URL must be the absolute URL of the original request',
  },
  ForwardedHeadersMissing: {
    status: 400,
    code: 'Bad Request',
    message:
      'X-Forwarded-Proto (http or https), X-Forwarded-Host and X-Forwarded-Uri must each be given once',
  },
  OriginalMethodBad: {
    status: 400,
    code: 'Bad Request',
    message: 'the original method is missing or malformed',
  },
  OriginalHostBad: { status: 400, code: 'Bad Request', message: 'the original host is malformed' },
  OriginalHostNotServed: {
    status: 400,
    code: 'Bad Request',
    message: 'the original host is not one this App is served on',
  },

  // The upstream (src/proxy/relay.ts)
  UpstreamBusy: {
    status: 503,
    code: 'Service Unavailable',
    message: 'the application is busy: try again shortly',
  },
  UpstreamTimeout: {
    status: 504,
    code: 'Gateway Timeout',
    message: 'the application did not answer in time',
  },
  UpstreamProtocol: {
    status: 502,
    code: 'Bad Gateway',
    message: 'the application sent a response the proxy cannot relay',
  },
  UpstreamUnreachable: { status: 502, code: 'Bad Gateway', message: 'the application cannot be reached' },

  /** A bug: the log line says what. */
  Internal: { status: 500, code: 'Internal Error', message: 'internal error in the proxy' },
} as const satisfies Record<string, ErrorEntry>;

export type ProxyErrorKind = keyof typeof PROXY_ERRORS;

/** The detail a kind's message takes, if any. */
type DetailOf<K extends ProxyErrorKind> = (typeof PROXY_ERRORS)[K]['message'] extends string
  ? []
  : [detail: string];

/** An answer the proxy gives itself instead of forwarding: the status and its X-Error-Code phrase. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The status, code and message of a kind of error. */
export function errorOf<K extends ProxyErrorKind>(
  kind: K,
  ...detail: DetailOf<K>
): { status: number; code: string; message: string } {
  const e: ErrorEntry = PROXY_ERRORS[kind];
  const message = typeof e.message === 'string' ? e.message : e.message(detail[0] ?? '');
  return { status: e.status, code: e.code, message };
}

/** The error of a kind, to throw or to answer with. */
export function proxyError<K extends ProxyErrorKind>(kind: K, ...detail: DetailOf<K>): HttpError {
  const { status, code, message } = errorOf(kind, ...detail);
  return new HttpError(status, code, message);
}

/** An error made from the table before (an authentication outcome, src/proxy/identity.ts), to throw. */
export function errorFrom(e: { status: number; code: string; message: string }): HttpError {
  return new HttpError(e.status, e.code, e.message);
}

/** A failed upstream exchange as the client sees it: 504 when it timed out, else 502. */
export function upstreamError(e: unknown): HttpError {
  const kind = (e as Partial<UpstreamError>).kind;
  const code = (e as { code?: string }).code ?? '';
  if (kind === 'timeout' || code === 'ETIMEDOUT') return proxyError('UpstreamTimeout');
  if (kind === 'protocol') return proxyError('UpstreamProtocol');
  return proxyError('UpstreamUnreachable');
}
