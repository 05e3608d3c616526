/**
 * llhttp, the parser inside node:http, driven directly: the reference the proxy's own response
 * parser is compared with. `_http_common` is Node's internal module that node:http itself builds
 * its parsers from; going through it (instead of an http.request against a raw server) gives the
 * exact byte where llhttp ends a message, which a client cannot observe.
 */
import { createRequire } from 'node:module';

interface NativeParser {
  initialize(type: number, resource: object, maxHeaderSize?: number, lenient?: number): void;
  execute(data: Buffer): number | (Error & { code?: string; reason?: string });
  finish(): undefined | (Error & { code?: string; reason?: string });
  close(): void;
  [key: number]: unknown;
}

interface ParserClass {
  new (): NativeParser;
  REQUEST: number;
  RESPONSE: number;
  kOnMessageBegin: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
  kOnExecute: number;
  kLenientNone: number;
}

const { HTTPParser } = createRequire(import.meta.url)('_http_common') as { HTTPParser: ParserClass };

/** What llhttp made of a response stream, read the way Node's http client reads it. */
export type LlhttpResponse =
  | {
      kind: 'complete';
      /** Every head's status, informational ones first. */
      statuses: number[];
      body: string;
      /** Offset just past the final response, or 'eof' when it ended with the connection. */
      end: number | 'eof';
      keepAlive: boolean;
    }
  | { kind: 'refused'; reason: string };

/**
 * Parses the response to a GET (or, with `head`, a HEAD) request in `input`, then the end of the
 * connection. Like Node's client, 1xx heads other than 101 are skipped, HEAD and 304 responses
 * have no body, and a 101 to a request that did not ask to switch is an error. The input is fed
 * one byte at a time so that the end of the final response is known to the byte.
 */
export function llhttpResponse(input: Buffer, head: boolean): LlhttpResponse {
  const p = new HTTPParser();
  p.initialize(HTTPParser.RESPONSE, {}, 0, HTTPParser.kLenientNone);
  const statuses: number[] = [];
  const body: Buffer[] = [];
  let final = false;
  let complete = false;
  let keepAlive = false;
  let upgrade = false;
  p[HTTPParser.kOnMessageBegin] = () => undefined;
  p[HTTPParser.kOnHeaders] = () => undefined;
  p[HTTPParser.kOnExecute] = () => undefined;
  p[HTTPParser.kOnHeadersComplete] = (
    _major: number,
    _minor: number,
    _headers: string[],
    _method: number,
    _url: string,
    status: number,
    _message: string,
    isUpgrade: boolean,
    shouldKeepAlive: boolean,
  ) => {
    statuses.push(status);
    if (isUpgrade) {
      upgrade = true;
      return 2;
    }
    if (status >= 100 && status < 200) return 1;
    final = true;
    keepAlive = shouldKeepAlive;
    return head || status === 304 ? 1 : 0;
  };
  p[HTTPParser.kOnBody] = (chunk: Buffer) => {
    body.push(Buffer.from(chunk));
  };
  p[HTTPParser.kOnMessageComplete] = () => {
    if (final) complete = true;
  };
  try {
    for (let i = 0; i < input.length; i++) {
      const r = p.execute(input.subarray(i, i + 1));
      if (r instanceof Error) return { kind: 'refused', reason: r.code ?? r.message };
      if (upgrade) return { kind: 'refused', reason: '101 or upgrade to a request that did not ask' };
      if (complete)
        return {
          kind: 'complete',
          statuses,
          body: Buffer.concat(body).toString('latin1'),
          end: i + 1,
          keepAlive,
        };
    }
    const r = p.finish();
    if (r instanceof Error) return { kind: 'refused', reason: r.code ?? r.message };
    if (!complete) return { kind: 'refused', reason: 'the connection ended before the response did' };
    return {
      kind: 'complete',
      statuses,
      body: Buffer.concat(body).toString('latin1'),
      end: 'eof',
      keepAlive,
    };
  } finally {
    p.close();
  }
}

/**
 * Reads the final responses in what a server sent so far, given the methods of the requests in
 * order (HEAD responses have no body): for the request-side harness, which waits for one response
 * per request before it ends its side of the connection, and needs to know which of them came
 * from the upstream (they carry the header `fromUpstream` names) rather than from the proxy or
 * Node's server.
 */
export class ResponseCounter {
  private readonly p = new HTTPParser();
  /** Per complete final response: its status and whether the upstream wrote it. */
  readonly finals: { status: number; fromUpstream: boolean }[] = [];
  failed = false;

  /** `fromUpstream`: the name (lower case) of a header only the upstream's responses have. */
  constructor(
    private readonly methods: string[],
    fromUpstream: string,
  ) {
    this.p.initialize(HTTPParser.RESPONSE, {}, 0, HTTPParser.kLenientNone);
    this.p[HTTPParser.kOnMessageBegin] = () => undefined;
    this.p[HTTPParser.kOnExecute] = () => undefined;
    this.p[HTTPParser.kOnBody] = () => undefined;
    let current: { status: number; fromUpstream: boolean } | undefined;
    let names: string[] = [];
    this.p[HTTPParser.kOnHeaders] = (headers: string[]) => {
      names = names.concat(headers.filter((_, i) => i % 2 === 0));
    };
    this.p[HTTPParser.kOnHeadersComplete] = (...a: unknown[]) => {
      const status = a[5] as number;
      const headers = (a[2] as string[] | undefined) ?? [];
      const all = names.concat(headers.filter((_, i) => i % 2 === 0));
      names = [];
      const informational = status >= 100 && status < 200 && status !== 101;
      current = informational
        ? undefined
        : { status, fromUpstream: all.some((n) => n.toLowerCase() === fromUpstream) };
      if (status === 101) return 2;
      return informational || this.methods[this.finals.length] === 'HEAD' || status === 304 ? 1 : 0;
    };
    this.p[HTTPParser.kOnMessageComplete] = () => {
      if (current) this.finals.push(current);
      current = undefined;
    };
  }

  get count() {
    return this.finals.length;
  }

  feed(data: Buffer) {
    if (this.failed) return;
    const r = this.p.execute(data);
    if (r instanceof Error) this.failed = true;
  }

  close() {
    this.p.close();
  }
}
