/** What the proxy reads from and checks in client requests: paths, hosts and headers. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { canonicalPath, PathError } from '../core/path.js';
import { redactUrl } from '../core/redact.js';
import { localReturnPath } from '../core/returnurl.js';
import { type HttpError, proxyError } from './errorcodes.js';
import { plainHostName } from './hosts.js';

/**
 * Hop-by-hop headers (RFC 9110 7.6.1), and the framing headers the upstream client sets itself:
 * never copied across.
 */
export const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'expect',
  'http2-settings',
]);
/** The lengths of HOP's names: a response header of another length is kept without a lookup. */
export const HOP_LENGTHS = new Set([...HOP].map((name) => name.length));

/**
 * Inbound header names never forwarded, besides HOP itself: the names only the proxy may set
 * (X-Service-*, X-Forwarded-*, Forwarded, X-Remote-User), names no client may set (X-Real-IP: a
 * client address; Remote-User: an identity apps read behind auth proxies; Proxy: httpoxy;
 * X-Original-URL, X-Rewrite-URL: a path some frameworks route by instead of the one whose mode the
 * proxy applied), in every mode, and any other spelling of those or of a hop-by-hop or framing
 * name. CGI, WSGI and PHP upstreams fold case and turn "-" into "_" (PHP also "."), so
 * `X_Service_User` or `x.service.user` would reach them as the real X-Service-User, and
 * `Transfer_Encoding` beside the proxy's own framing as a second one. So every character other
 * than a letter or digit counts as "-".
 * `name` is as Node gives it (lower case).
 */
export function isReserved(name: string): boolean {
  // Runs for every header of every request: the answer per name is remembered (clients send a
  // few dozen distinct names; the map is emptied when junk names fill it).
  let reserved = reservedNames.get(name);
  if (reserved === undefined) {
    const n = /[^a-z0-9-]/.test(name) ? name.toLowerCase().replace(/[^a-z0-9]/g, '-') : name;
    reserved = n !== name ? HOP.has(n) || reservedCanonical(n) : reservedCanonical(n);
    if (reservedNames.size >= 512) reservedNames.clear();
    reservedNames.set(name, reserved);
  }
  return reserved;
}

// module-state: a process-wide memo of a pure function of a header name (the same answer for every proxy).
const reservedNames = new Map<string, boolean>();

function reservedCanonical(n: string): boolean {
  return (
    n.startsWith('x-service-') ||
    n.startsWith('x-forwarded-') ||
    n === 'x-remote-user' ||
    n === 'forwarded' ||
    n === 'x-real-ip' ||
    n === 'remote-user' ||
    n === 'proxy' ||
    n === 'x-original-url' ||
    n === 'x-rewrite-url'
  );
}

/**
 * Headers a Connection list may not remove: the proxy forwards the client's Host (an HTTP/1.1
 * request without one is refused), so "Connection: host" must not take it away. The other headers
 * the upstream relies on (X-Forwarded-*, the identity headers, the synthetic Authorization) are
 * the proxy's own, added after the client's and never taken from it.
 */
const NOT_HOP_BY_HOP = new Set(['host']);

/** The Host header's DNS name (lower case, no port) when it is a plain "name[:port]"; else undefined. */
export function hostOf(req: IncomingMessage): string | undefined {
  return plainHostName(req.headers.host);
}

/**
 * An origin from what the proxy knows of a connection: its scheme, `name` when the caller has
 * checked it is one the proxy serves, else the local address the connection arrived on (IPv6 in
 * brackets, IPv4-mapped IPv6 as IPv4), and the local port unless it is the scheme's default.
 */
export function listenerOrigin(
  secure: boolean,
  name: string | undefined,
  address: string | undefined,
  port: number | undefined,
): string {
  let host = name;
  if (host === undefined) {
    const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address ?? '');
    if (mapped) host = mapped[1] as string;
    else if (address?.includes(':')) host = `[${address.replace(/%/g, '%25')}]`;
    else host = address || 'localhost';
  }
  const scheme = secure ? 'https' : 'http';
  return port === undefined || port === (secure ? 443 : 80)
    ? `${scheme}://${host}`
    : `${scheme}://${host}:${port}`;
}

/**
 * The path (canonical, see requestPath) and the query ("" or from "?") of a request target.
 * Only origin-form ("/path?query") is accepted: an absolute-form target ("http://host/path")
 * would match no prefix and reach the upstream as it was sent. A "#" anywhere is refused: it is
 * never sent by browsers, and upstreams disagree on whether it ends the path.
 */
export function requestTarget(url: string | undefined): { path: string; query: string } {
  const target = url ?? '/';
  if (target.includes('#')) throw proxyError('TargetFragment');
  const q = target.indexOf('?');
  const rawPath = q < 0 ? target : target.slice(0, q);
  if (!rawPath.startsWith('/')) throw proxyError('TargetNotPath');
  return { path: requestPath(rawPath), query: q < 0 ? '' : target.slice(q) };
}

/**
 * The path the proxy decides on and forwards: its canonical form (src/core/path.ts), the same form
 * configured prefixes are in. A path without one (encoded slashes, control characters, bad or
 * double escapes) is refused with 400 rather than guessed at: an upstream reading it another way
 * would see another path than the one whose mode was applied.
 */
export function requestPath(raw: string): string {
  try {
    return canonicalPath(raw);
  } catch (e) {
    if (e instanceof PathError) throw proxyError('PathNotCanonical', e.message);
    throw e;
  }
}

/** Parsed Connection header values: a handful of distinct ones ("keep-alive", "close") in practice. */
// module-state: a process-wide memo of a pure function of a Connection header value (the same answer for every proxy).
const connectionCache = new Map<string, Set<string> | undefined>();

export function connectionTokens(v: string | string[] | undefined): Set<string> | undefined {
  if (!v) return undefined;
  if (typeof v === 'string') {
    if (connectionCache.has(v)) return connectionCache.get(v);
    const set = parseConnection(v);
    if (connectionCache.size >= 64) connectionCache.clear();
    connectionCache.set(v, set);
    return set;
  }
  return parseConnection(v.join(','));
}

function parseConnection(text: string): Set<string> | undefined {
  const set = new Set(
    text
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter((t) => t !== '' && !NOT_HOP_BY_HOP.has(t)),
  );
  return set.size ? set : undefined;
}

/** Header values are bytes: UTF-8 text is sent as its bytes; CR, LF and NUL are dropped. */
export function headerText(v: string): string {
  const clean = v.replace(/[\r\n\0]/g, '');
  return /^[\x20-\x7e]*$/.test(clean) ? clean : Buffer.from(clean, 'utf8').toString('latin1');
}

export function isBrowser(req: Pick<IncomingMessage, 'method' | 'headers'>): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  return String(req.headers.accept ?? '').includes('text/html');
}

/**
 * Only a path on this origin may be returned to after sign-in: the project's one check
 * (src/core/returnurl.ts, also the service's); anything else returns to "/".
 */
export function safeReturnPath(v: string): string {
  return localReturnPath(v, '/');
}

/**
 * A request target fit for the log: access_token and anything shaped like a key or proxy token
 * redacted in any encoding (src/core/redact.ts), and the one-time token of an access-check URL.
 */
export function redact(url: string | undefined) {
  return redactUrl(url ?? '').replace(/(\/access-check\/)[^/?]+/, '$1[REDACTED]');
}

/**
 * A request body of at most `limit` bytes, as UTF-8 text: 413 when it is longer, 408 when it
 * pauses `idleMs` between two chunks. Either way reading stops there and the request is left as it
 * is, so that the answer (sendError) reaches the client and bounds what more is read of it.
 */
export function readBody(req: IncomingMessage, limit: number, idleMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => stop(proxyError('FormStalled')), idleMs);
    timer.unref();
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return stop(proxyError('FormTooLarge', String(limit)));
      chunks.push(chunk);
      timer.refresh();
    };
    const onEnd = () => stop(undefined);
    const onClose = () => stop(proxyError('BodyCutOff'));
    const stop = (e: HttpError | undefined) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      if (e) {
        req.pause();
        reject(e);
      } else resolve(Buffer.concat(chunks).toString('utf8'));
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
  });
}

/**
 * Sends `100 Continue` to a client that asked for it (`Expect: 100-continue`, which reaches the
 * handler through 'checkContinue' with no 100 sent): only once the proxy is going to read the body.
 */
export function continueIfExpected(req: IncomingMessage, res: ServerResponse) {
  const expect = req.headers.expect;
  if (expect !== undefined && expect.toLowerCase() === '100-continue' && !res.headersSent)
    res.writeContinue();
}
