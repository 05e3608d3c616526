/** The proxy's origin as a request reached it, for access-check URLs and sign-in links. */
import type { IncomingMessage } from 'node:http';
import { httpOrigin } from './hosts.js';
import { hostOf, listenerOrigin } from './http.js';
import type { ProxySnapshot } from './snapshot.js';

/** How the proxy is reached, beside its settings. */
export interface Listener {
  /** Whether clients reach this proxy over TLS. */
  readonly secure: boolean;
  /** Set when the proxy serves TLS: does it hold a certificate for this (lower-case) name? */
  readonly holdsCertificateFor: ((name: string) => boolean) | undefined;
}

/**
 * The proxy's origin as this request reached it, built only from what the proxy has checked:
 * the listener's scheme; the Host's name only when the proxy serves it (proxy.name, a
 * VirtualHost of the App, a name it holds a certificate for), else the connection's local
 * address; and always the port the connection arrived on, never the client's. The upstream
 * POSTs access checks to it and sign-in links are built from it, so a Host, X-Forwarded-Host or
 * Forwarded header of the client's choosing must not steer it (to an attacker's listener that
 * would answer 200). A name learned from the first plaintext request does not count.
 */
export function originOf(req: IncomingMessage, snapshot: ProxySnapshot, listener: Listener): string {
  const host = req.headers.host;
  const { localAddress, localPort } = req.socket;
  // Clients mostly send the same Host to the same address: the last origin is kept per snapshot.
  const memo = snapshot.originMemo;
  if (host === memo.host && localPort === memo.port && localAddress === memo.address) return memo.origin;
  const name = hostOf(req);
  const served =
    name !== undefined && (snapshot.routes.serves(name) || listener.holdsCertificateFor?.(name) === true);
  const origin = listenerOrigin(listener.secure, served ? name : undefined, localAddress, localPort);
  memo.host = host;
  memo.address = localAddress;
  memo.port = localPort ?? -1;
  memo.origin = origin;
  return origin;
}

/**
 * The origin a request reached: behind a trusted front proxy (forward auth), its Host with the
 * scheme the front proxy says (X-Forwarded-Proto), else the proxy's own (originOf). Used only to
 * start a sign-in again at the callback; the service accepts the callback URL on an origin of
 * the App only.
 */
export function callbackOrigin(req: IncomingMessage, snapshot: ProxySnapshot, listener: Listener): string {
  const host = req.headers.host;
  if (host === undefined || !snapshot.trusted.matches(req.socket.remoteAddress))
    return originOf(req, snapshot, listener);
  const proto = req.headers['x-forwarded-proto'];
  const scheme = proto === 'https' || proto === 'http' ? proto : listener.secure ? 'https' : 'http';
  return httpOrigin(`${scheme}://${host}/`) ?? originOf(req, snapshot, listener);
}

/** The first request's host name, when proxy.name is unset: the TLS manager gets a certificate for it. */
export class FirstHost {
  /** The name learned; undefined until a request brought one. */
  name: string | undefined;
  /** Called once, with the name learned. */
  onLearned: ((host: string) => void) | undefined;
  /** A Host header already found to hold no name to learn (an IP address). */
  private unlearnable: string | undefined;

  learn(req: IncomingMessage, snapshot: ProxySnapshot) {
    if (this.name !== undefined || snapshot.config.proxy.name !== '') return;
    const raw = req.headers.host;
    if (raw !== undefined && raw === this.unlearnable) return;
    // Only a DNS name: never an address, user info or a URL.
    const host = hostOf(req);
    if (host === undefined) {
      this.unlearnable = raw;
      return;
    }
    this.name = host;
    this.onLearned?.(host);
  }
}
