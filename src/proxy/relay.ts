import type { ServerResponse } from 'node:http';
import { setsGatehouseCookie } from './cookie.js';
import { type HttpError, proxyError, upstreamError } from './errorcodes.js';
import { connectionTokens, HOP, HOP_LENGTHS } from './http.js';
import type { Exchange } from './upstream/exchange.js';
import type { ResponseSink, UpstreamError } from './upstream/request.js';
import type { ResponseHead } from './upstream/response.js';

/**
 * Relays one upstream response to the client: headers without hop-by-hop ones, then the body
 * chunks with backpressure. Failures before the response go to `fail` (502/504).
 */
export class Relay implements ResponseSink {
  exchange: Exchange | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly extraCookies: string[] | undefined,
    private readonly fail: (e: HttpError) => void,
  ) {}

  onHead(head: ResponseHead) {
    this.res.writeHead(head.status, endToEndHeaders(head, this.extraCookies));
  }

  onData(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true;
    this.res.once('drain', () => this.exchange?.resume());
    return false;
  }

  onEnd() {
    this.res.end();
  }

  onError(err: UpstreamError, responded: boolean) {
    if (!responded) {
      const out = upstreamFailure(err);
      // The request's body was cut short: the connection cannot carry another request.
      if (err.kind === 'body-idle') this.res.setHeader('connection', 'close');
      if (err.kind === 'busy') this.res.setHeader('retry-after', RETRY_AFTER_S);
      return this.fail(out);
    }
    this.res.destroy();
  }
}

/** Seconds a client is asked to wait after a 503 for want of an upstream connection. */
export const RETRY_AFTER_S = '5';

/** A failed exchange as the client sees it (the pool's own limits, then upstreamError). */
export function upstreamFailure(err: UpstreamError): HttpError {
  let out: HttpError;
  if (err.kind === 'busy') out = proxyError('UpstreamBusy');
  else if (err.kind === 'body-idle') out = proxyError('BodyStoppedArriving');
  else out = upstreamError(err);
  out.cause = err.message;
  return out;
}

/**
 * The response headers passed to the client: hop-by-hop ones (and those Connection names) are
 * dropped, Content-Length stays once (it is the framing towards the client too), `extraCookies`
 * are added.
 */
export function endToEndHeaders(
  { headers, connection }: ResponseHead,
  extraCookies: string[] | undefined,
): string[] {
  const connTokens = connectionTokens(connection);
  const out: string[] = [];
  let length = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    let value = headers[i + 1] as string;
    // Only names as long as a hop-by-hop one can be one (or any, if Connection lists more).
    if (connTokens !== undefined || HOP_LENGTHS.has(name.length)) {
      const lower = name.toLowerCase();
      if (lower === 'content-length') {
        // The parser accepted repeats only of one value ("5, 5", or the header twice): the client
        // gets it once, as Node's own client (llhttp) refuses a response that repeats it.
        if (length) continue;
        length = true;
        const comma = value.indexOf(',');
        if (comma >= 0) value = value.slice(0, comma).trim();
      } else if (HOP.has(lower) || connTokens?.has(lower)) continue;
    }
    // The application may not set Gatehouse's cookies (session fixation through the app).
    if (name.length === 10 && setsGatehouseCookie(value) && name.toLowerCase() === 'set-cookie') continue;
    out.push(name, value);
  }
  if (extraCookies) for (const c of extraCookies) out.push('set-cookie', c);
  return out;
}
