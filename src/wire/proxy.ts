/**
 * The back channel between `gatehouse proxy` and the service: JSON over HTTP(S) to auth.server,
 * every call authenticated with the proxy's auth.token as `Authorization: Bearer <token>`.
 * Both sides import these shapes, so they cannot drift apart.
 */
export const BACKCHANNEL = '/proxy/v1';

/**
 * What a Gatehouse API key looks like (src/objects/apikey.ts makes them): "gv" and 54 base62
 * characters. The proxy uses it to tell the service's keys from an app's own bearer tokens, which
 * it must forward untouched.
 */
export const API_KEY_PATTERN = /^gv[A-Za-z0-9]{54}$/;

/**
 * The X-Error-Code of the service's 403 when the App is closed to the user (AccessGroups, level,
 * location), as opposed to a refused credential: the proxy then answers 403 instead of asking
 * for a sign-in. The service's error table (src/core/errors.ts AppRefused) holds the same code.
 */
export const APP_REFUSED_CODE = 'App Refused';

/** Paths the proxy answers itself; every other path is forwarded to an upstream. */
export const PROXY_PATHS = {
  base: '/.gatehouse/',
  callback: '/.gatehouse/callback',
  signin: '/.gatehouse/signin',
  accessCheck: '/.gatehouse/access-check/',
  /** The public keys that verify X-Service-Assertion (a JWK Set; docs/federation.md). */
  jwks: '/.gatehouse/jwks.json',
  /** Forward auth for nginx auth_request: the original request in X-Original-URL and -Method. */
  authRequest: '/.gatehouse/authz/auth-request',
  /** Forward auth for Traefik forwardAuth and Caddy forward_auth: the original in X-Forwarded-*. */
  forwardAuth: '/.gatehouse/authz/forward-auth',
  /** Readiness for load balancers: 200 while the service answers, else 503 (docs/proxy.md). */
  health: '/.gatehouse/health',
} as const;

/**
 * The signed identity assertion the proxy adds to forwarded requests: an ES256 JWT an upstream
 * verifies with the keys at PROXY_PATHS.jwks instead of trusting the network (docs/federation.md).
 */
export const ASSERTION_HEADER = 'x-service-assertion';

/**
 * The service's browser cookies. Part of the contract because the proxy must never forward them:
 * with the service and an App on one host name (cookies ignore ports) or under a shared parent
 * domain, the browser sends them to the proxy too, and the App could replay them as the user.
 */
export const SERVICE_COOKIES = { session: 'gatehouse_session', device: 'gatehouse_device' } as const;
/** The service's cookies over TLS are `__Host-` + name: host-only, Secure, Path=/, no Domain. */
export const HOST_COOKIE_PREFIX = '__Host-';
/**
 * Every cookie of Gatehouse (the service's and the proxy's) is named with this prefix (after an
 * optional `__Host-` or `__Secure-`): the proxy strips such cookies from requests and refuses to
 * relay an upstream's Set-Cookie for them.
 */
export const GATEHOUSE_COOKIE_PREFIX = 'gatehouse_';

/** The user a request is forwarded for, as the service describes it. */
export interface WireIdentity {
  UserID: string;
  UserName: string;
  Email: string;
  FullName: string;
  /** Service session behind a cookie; absent for API keys. */
  SessionID?: string;
  /** RFC 3339; when the session (or key) stops being valid; absent when it never expires. */
  Expires?: string;
  /** IDs of the groups whose membership counts now (active, at the session's level); at most 64. */
  Groups?: string[];
  /** The service session's integrity level; absent for API keys. */
  IntegrityLevel?: number;
}

export interface RegisterRequest {
  Name: string;
  Version: string;
  /** Public origin of the proxy when known (proxy.name or the first request's host). */
  Address: string;
}

/** One VirtualHost of the App, as the proxy routes it. */
export interface HostRoute {
  /** The host name (lower case), compared with the request's Host without its port. */
  Name: string;
  /** http(s) URL replacing proxy.upstream for this host; empty: not set. */
  Upstream: string;
  /** `none`, `optional` or `required` for this host; empty: not set. */
  Auth: string;
}

export interface RegisterResponse {
  AppID: string;
  AppName: string;
  RemoteAgentID: string;
  /** Host names the proxy may obtain certificates for: the App's VirtualHost names. */
  VirtualHosts: string[];
  /** The App's ProxyAuth: the default mode when proxy.auth is not set explicitly. */
  ProxyAuth: string;
  /** The App's VirtualHosts with their routing settings (a service before them sends neither field). */
  Hosts: HostRoute[];
  /**
   * Where a user the App is closed to (App.AccessGroups) asks for access: the access-request page
   * of the App's first AccessGroup, absolute. Absent when the App has none (or an older service).
   */
  AccessRequestURL?: string;
  /**
   * The origins the App is served on (App.URL, App.AllowedOrigins, https://<VirtualHost>): the
   * forward-auth endpoints start a sign-in only for these. Absent from an older service.
   */
  Origins?: string[];
}

export interface ApiKeyRequest {
  Key: string;
}

export interface CodeRequest {
  Code: string;
}

export interface SessionCheckRequest {
  SessionID: string;
}

export interface AccessCheckRequest {
  UserID: string;
  Groups: string[];
  Op: 'and' | 'or';
  Next: string;
  /** The service session behind the request, when it came with a cookie (its integrity level counts). */
  SessionID?: string;
}

export interface AccessCheckEntry {
  GroupID: string;
  StatusCode: number;
  Location?: string;
}

export interface AccessCheckResponse {
  Satisfied: boolean;
  Location?: string;
  Results: AccessCheckEntry[];
}

/** Proxy token format: "gp." + App ID + "." + 43 characters of base64url (256 random bits). */
export const PROXY_TOKEN_PATTERN = /^gp\.([a-z0-9]{1,64})\.([A-Za-z0-9_-]{43})$/;
