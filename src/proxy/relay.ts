import type { ServerResponse } from 'node:http';
import { type HttpError, upstreamError } from './errors.js';
import { connectionTokens, HOP, HOP_LENGTHS } from './http.js';
import type { Exchange, ResponseSink, UpstreamError } from './upstream/pool.js';
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

  onHead({ status, headers, connection }: ResponseHead) {
    const connTokens = connectionTokens(connection);
    const out: string[] = [];
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i] as string;
      // Only names as long as a hop-by-hop one can be one (or any, if Connection lists more).
      if (connTokens !== undefined || HOP_LENGTHS.has(name.length)) {
        const lower = name.toLowerCase();
        // Content-Length stays: it is the response's framing towards the client too.
        if ((HOP.has(lower) && lower !== 'content-length') || connTokens?.has(lower)) continue;
      }
      out.push(name, headers[i + 1] as string);
    }
    if (this.extraCookies) for (const c of this.extraCookies) out.push('set-cookie', c);
    this.res.writeHead(status, out);
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
      const out = upstreamError(err);
      out.cause = err.message;
      return this.fail(out);
    }
    this.res.destroy();
  }
}
