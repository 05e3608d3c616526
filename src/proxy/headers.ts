/**
 * What the upstream sees of a request: the client's header lines, less what it must not get, and
 * the proxy's own (forwarding, the access-check URL, the identity).
 */
import type { IncomingMessage } from 'node:http';
import { ASSERTION_HEADER, PROXY_PATHS, type WireIdentity } from '../wire/proxy.js';
import type { AssertionSigner, SigningKey } from './assertion.js';
import { stripOwnCookies } from './cookie.js';
import { forwardableAuthorization } from './credentials.js';
import { connectionTokens, HOP, headerText, isReserved } from './http.js';
import type { AuthOutcome, Identified } from './identity.js';
import type { UpstreamTarget } from './upstream/request.js';

/**
 * The header lines of the upstream request (each ending in CRLF): the client's headers less
 * hop-by-hop, framing, reserved (any spelling), Gatehouse's cookies and any Authorization the
 * upstream could take for ours, then the proxy's headers, each exactly once (with a user: the
 * identity headers and the signed assertion, src/proxy/assertion.ts).
 * Node's parser has already refused CR, LF and NUL in the client's names and values.
 */
export function upstreamHeaders(
  req: IncomingMessage,
  auth: Extract<AuthOutcome, { ok: true }>,
  token: string,
  /** Where the upstream reaches this proxy: proxy.privateaddress, else the request's origin. */
  accessCheckOrigin: string,
  target: UpstreamTarget,
  /** Whether the client reached the proxy over TLS. */
  secure: boolean,
  /** Signs the identity assertion (X-Service-Assertion) of requests forwarded for a user. */
  assertions: AssertionSigner,
  /** The request's signing key (its snapshot's). */
  assertionKey: SigningKey,
): string {
  const who = auth.who;
  const from = req.headers;
  const conn = connectionTokens(from.connection);
  let h = '';
  for (const k in from) {
    const v = from[k];
    if (v === undefined || HOP.has(k) || isReserved(k) || conn?.has(k)) continue;
    // With an identity the proxy's synthetic Authorization replaces the client's. Without one,
    // the client's is the application's own, unless it holds our key or could pass for ours.
    if (
      k === 'authorization' &&
      (who || !forwardableAuthorization(v as string, auth.appAuthorization ? 'none' : 'optional'))
    )
      continue;
    if (k === 'cookie') {
      const kept = stripOwnCookies(v as string);
      if (kept) h += `cookie: ${kept}\r\n`;
      continue;
    }
    if (typeof v === 'string') h += `${k}: ${v}\r\n`;
    else for (const one of v) h += `${k}: ${one}\r\n`;
  }
  // HTTP/1.1 requires a Host; an HTTP/1.0 client may not have sent one.
  if (from.host === undefined) h += `host: ${target.authority}\r\n`;
  h += `x-forwarded-for: ${req.socket.remoteAddress ?? ''}\r\nx-forwarded-proto: ${secure ? 'https' : 'http'}\r\n`;
  if (from.host !== undefined) h += `x-forwarded-host: ${from.host}\r\n`;
  h += `x-service-access-check: ${accessCheckOrigin}${PROXY_PATHS.accessCheck}${token}\r\n`;
  if (who)
    h += `${identityHeaders(who.identity)[who.authType]}${ASSERTION_HEADER}: ${assertions.assertion(who.identity, who.authType, assertionKey)}\r\n`;
  return h;
}

/** The identity header lines of an identity, one block per X-Service-Auth-Type value. */
type IdentityHeaders = Record<Identified['authType'], string>;

/**
 * The identity header lines, computed once per identity object: the API key and cookie caches
 * hand out the same (never modified) object for every request of a user.
 */
// module-state: a side table on each identity object (its header lines, made once); gone with the identity.
const identityHeaderCache = new WeakMap<WireIdentity, IdentityHeaders>();

function identityHeaders(id: WireIdentity): IdentityHeaders {
  let h = identityHeaderCache.get(id);
  if (!h) {
    const email = headerText(id.Email);
    const common =
      `x-service-user-name: ${headerText(id.UserName)}\r\n` +
      `x-service-email: ${email}\r\n` +
      `x-service-full-name: ${headerText(id.FullName)}\r\n` +
      `x-service-user: ${headerText(id.UserID)}\r\n` +
      (id.Expires ? `x-service-session-expires: ${new Date(id.Expires).toUTCString()}\r\n` : '') +
      `x-remote-user: ${email}\r\n` +
      `authorization: Basic ${Buffer.from(`${id.Email}:`, 'utf8').toString('base64')}\r\n`;
    h = {
      bearer: `${common}x-service-auth-type: bearer\r\n`,
      session: `${common}x-service-auth-type: session\r\n`,
    };
    identityHeaderCache.set(id, h);
  }
  return h;
}
