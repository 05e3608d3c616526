/**
 * A strict HTTP/1.1 response parser for the proxy's upstream connections (RFC 9112). It reads
 * responses only (the proxy writes requests itself), refuses anything ambiguous about where a
 * message ends, and bounds every buffer it keeps. Why not undici, Node's parser or a package:
 * docs/decisions.md, "The proxy's upstream client".
 */

/** A response head: `headers` is flat, [name, value, name, value, ...], names as sent. */
export interface ResponseHead {
  status: number;
  headers: string[];
  /** The connection may carry another request after this response. */
  keepAlive: boolean;
  /** The server's `Keep-Alive: timeout=<s>` hint, when given. */
  keepAliveTimeoutS: number | undefined;
  /** The Connection header's values joined by commas (it names more hop-by-hop headers). */
  connection: string | undefined;
}

export interface ResponseEvents {
  /** A head: informational (1xx) heads come first, then exactly one final head. */
  onHead(head: ResponseHead): void;
  onBody(chunk: Buffer): void;
  /** The final response is complete. */
  onEnd(): void;
}

export class ResponseParseError extends Error {
  readonly code = 'UPSTREAM_PROTOCOL';
}

/** Limits: a head (status line and headers), one chunk-size line, all trailers. */
export const MAX_HEAD_BYTES = 64 * 1024;
const MAX_CHUNK_LINE = 1024;
const MAX_TRAILER_BYTES = 16 * 1024;

const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [\t\x20-\x7e\x80-\xff]*)?$/;
/**
 * A chunk-size line: the size, then extensions `;name` or `;name=value` (a token or a quoted
 * string), no whitespace anywhere: what llhttp accepts, so the proxy never reads a chunk line that
 * Node-based clients and servers refuse (RFC 9112 7.1.1 lets a parser take whitespace around ";"
 * and "=": llhttp does not, and neither does this parser).
 */
const CHUNK_SIZE =
  /^([0-9A-Fa-f]{1,12})(?:;[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:=(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"))?)*$/;
const DIGITS = /^\d{1,15}$/;

enum State {
  Head,
  Sized,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  UntilClose,
  Done,
}

/**
 * Feed it the bytes of one connection; it calls the events as it goes. One parser serves one
 * response at a time: `start()` before each request's response.
 */
export class ResponseParser {
  private state = State.Done;
  /** Bytes of an unfinished head or line, kept across reads. */
  private partial: Buffer | undefined;
  private remaining = 0;
  private trailerBytes = 0;
  private noBody = false;
  private keepAlive = false;
  /** The request asked to switch protocols: a 101 is then a final head, not an error. */
  private upgrade = false;

  constructor(private readonly events: ResponseEvents) {}

  /**
   * Expect a new response; `noBody` for responses to HEAD; `upgrade` when the request asked to
   * switch protocols. A 101 then ends the response at its head: `feed` returns the bytes that
   * follow it unread (they belong to the new protocol), and `onEnd` is not called.
   */
  start(noBody: boolean, upgrade = false) {
    this.state = State.Head;
    this.partial = undefined;
    this.noBody = noBody;
    this.upgrade = upgrade;
  }

  /** Whether the final response is complete (bytes fed after it are the server's error). */
  get done() {
    return this.state === State.Done;
  }

  /** Whether nothing of a response has arrived yet. */
  get idle() {
    return this.state === State.Head && this.partial === undefined;
  }

  /**
   * Parses `data`; returns how many bytes belong to the current response (less than
   * `data.length` only when the response ended and more bytes followed it). Throws
   * ResponseParseError on anything malformed: the connection must then be closed.
   */
  feed(data: Buffer): number {
    let at = 0;
    while (at < data.length && this.state !== State.Done) {
      switch (this.state) {
        case State.Head:
          at = this.head(data, at);
          break;
        case State.Sized:
          at = this.take(data, at);
          if (this.remaining === 0) this.finish();
          break;
        case State.UntilClose:
          this.events.onBody(at === 0 ? data : data.subarray(at));
          at = data.length;
          break;
        case State.ChunkSize:
          at = this.chunkSize(data, at);
          break;
        case State.ChunkData:
          at = this.take(data, at);
          if (this.remaining === 0) {
            this.state = State.ChunkEnd;
            this.remaining = 2;
          }
          break;
        case State.ChunkEnd:
          // The CRLF after a chunk's data, possibly split across reads.
          if (data[at] !== (this.remaining === 2 ? 0x0d : 0x0a)) throw bad('a chunk is not followed by CRLF');
          at++;
          if (--this.remaining === 0) this.state = State.ChunkSize;
          break;
        case State.Trailers:
          at = this.trailers(data, at);
          break;
      }
    }
    return at;
  }

  /** Passes on up to `remaining` body bytes from `at`; returns where it stopped. */
  private take(data: Buffer, at: number): number {
    const n = Math.min(this.remaining, data.length - at);
    this.remaining -= n;
    this.events.onBody(data.subarray(at, at + n));
    return at + n;
  }

  /** The connection was closed by the server: ends a response delimited by the close. */
  eof(): boolean {
    if (this.state !== State.UntilClose) return false;
    this.finish();
    return true;
  }

  private finish() {
    this.state = State.Done;
    this.partial = undefined;
    this.events.onEnd();
  }

  /** Reads a line ending in CRLF from `partial` + data; undefined (bytes kept) when incomplete. */
  private line(data: Buffer, at: number, max: number, what: string): [string, number] | undefined {
    const lf = data.indexOf(0x0a, at);
    const kept = this.partial?.length ?? 0;
    if (lf < 0) {
      if (kept + data.length - at > max) throw bad(`${what} is longer than ${max} bytes`);
      this.partial = this.partial
        ? Buffer.concat([this.partial, data.subarray(at)])
        : Buffer.from(data.subarray(at));
      return undefined;
    }
    if (kept + lf - at > max) throw bad(`${what} is longer than ${max} bytes`);
    const bytes = this.partial
      ? Buffer.concat([this.partial, data.subarray(at, lf + 1)])
      : data.subarray(at, lf + 1);
    this.partial = undefined;
    if (bytes.length < 2 || bytes[bytes.length - 2] !== 0x0d) throw bad(`${what} does not end in CRLF`);
    return [bytes.toString('latin1', 0, bytes.length - 2), lf + 1];
  }

  private head(data: Buffer, at: number): number {
    // The whole head is parsed at once: find its blank line first.
    let buf = data;
    let from = at;
    if (this.partial) {
      buf = Buffer.concat([this.partial, data.subarray(at)]);
      from = 0;
    }
    const end = buf.indexOf('\r\n\r\n', from, 'latin1');
    if (end < 0) {
      if (buf.length - from > MAX_HEAD_BYTES)
        throw bad(`the response head is larger than ${MAX_HEAD_BYTES} bytes`);
      this.partial = Buffer.from(buf.subarray(from));
      return data.length;
    }
    if (end - from > MAX_HEAD_BYTES) throw bad(`the response head is larger than ${MAX_HEAD_BYTES} bytes`);
    const consumed = this.partial ? end + 4 - this.partial.length + at : end + 4;
    this.partial = undefined;
    this.parseHead(buf.toString('latin1', from, end));
    return consumed;
  }

  private parseHead(text: string) {
    let eol = text.indexOf('\r\n');
    if (eol < 0) eol = text.length;
    const status = STATUS_LINE.exec(text.slice(0, eol));
    if (!status) throw bad('the status line is malformed');
    const http10 = status[1] === '0';
    const code = Number(status[2]);
    const headers: string[] = [];
    let length: string | undefined;
    let chunked = false;
    let close = http10;
    let keepAliveTimeoutS: number | undefined;
    let connection: string | undefined;
    while (eol < text.length) {
      const start = eol + 2;
      eol = text.indexOf('\r\n', start);
      if (eol < 0) eol = text.length;
      // Also refuses obsolete line folding (a line starting with a space) and bare CR or LF.
      if (!pushField(text, start, eol, headers)) throw bad('a header line is malformed');
      const name = headers[headers.length - 2] as string;
      const value = headers[headers.length - 1] as string;
      // Only four names matter here; compare lengths first to skip the rest cheaply.
      const n = name.length;
      if (n !== 10 && n !== 14 && n !== 17) continue;
      const lower = name.toLowerCase();
      if (lower === 'connection') {
        connection = connection === undefined ? value : `${connection},${value}`;
        for (const t of value.toLowerCase().split(',')) {
          const token = t.trim();
          if (token === 'close') close = true;
          else if (token === 'keep-alive' && http10) close = false;
        }
      } else if (lower === 'keep-alive') {
        const t = /(?:^|[,\s])timeout\s*=\s*(\d{1,6})/i.exec(value);
        if (t) keepAliveTimeoutS = Number(t[1]);
      } else if (lower === 'content-length') {
        // Repeated or listed values must all be one number, else the body's end is ambiguous.
        for (const v of value.split(',')) {
          const digits = v.trim();
          if (!DIGITS.test(digits) || (length !== undefined && length !== digits))
            throw bad('Content-Length is invalid or ambiguous');
          length = digits;
        }
      } else if (lower === 'transfer-encoding') {
        // Only "chunked", once: any other coding would leave the end of the body to a guess.
        if (chunked || value.trim().toLowerCase() !== 'chunked' || http10)
          throw bad('only "Transfer-Encoding: chunked" is understood');
        chunked = true;
      }
    }
    if (chunked && length !== undefined) throw bad('both Content-Length and Transfer-Encoding were sent');
    if (code === 101 && !this.upgrade)
      throw bad('101 Switching Protocols to a request that did not ask to switch');
    const informational = code < 200;
    // An interim response that closes the connection leaves nothing that could follow it.
    if (informational && close) throw bad('an informational response closes the connection');
    const bodyless = informational || code === 204 || code === 304 || this.noBody;
    const untilClose = !bodyless && !chunked && length === undefined;
    const head: ResponseHead = {
      status: code,
      headers,
      keepAlive: !close && !untilClose,
      keepAliveTimeoutS,
      connection,
    };
    this.keepAlive = head.keepAlive;
    this.events.onHead(head);
    if (code === 101) {
      // The connection is no longer HTTP: what follows is not this parser's to read.
      this.keepAlive = false;
      this.state = State.Done;
      this.partial = undefined;
      return;
    }
    if (informational) {
      this.state = State.Head;
      return;
    }
    if (bodyless || (length !== undefined && Number(length) === 0)) return this.finish();
    if (chunked) this.state = State.ChunkSize;
    else if (length !== undefined) {
      this.remaining = Number(length);
      this.state = State.Sized;
    } else this.state = State.UntilClose;
  }

  /** Whether the last final response allows another request on the connection. */
  get reusable() {
    return this.keepAlive;
  }

  private chunkSize(data: Buffer, at: number): number {
    const got = this.line(data, at, MAX_CHUNK_LINE, 'a chunk-size line');
    if (!got) return data.length;
    const m = CHUNK_SIZE.exec(got[0]);
    if (!m) throw bad('a chunk-size line is malformed');
    const size = Number.parseInt(m[1] as string, 16);
    if (size === 0) {
      this.state = State.Trailers;
      this.trailerBytes = 0;
    } else {
      this.remaining = size;
      this.state = State.ChunkData;
    }
    return got[1];
  }

  /** Trailer fields are read, bounded and dropped (the proxy does not forward trailers). */
  private trailers(data: Buffer, at: number): number {
    const got = this.line(data, at, MAX_TRAILER_BYTES - this.trailerBytes, 'the trailer section');
    if (!got) return data.length;
    this.trailerBytes += got[0].length + 2;
    if (got[0] === '') this.finish();
    else if (!pushField(got[0], 0, got[0].length, [])) throw bad('a trailer line is malformed');
    // Framing in a trailer (RFC 9110 6.5.1 forbids it) is the sign of a confused upstream; llhttp
    // refuses Content-Length there too.
    else if (/^(?:content-length|transfer-encoding)[\t ]*:/i.test(got[0]))
      throw bad('a trailer carries Content-Length or Transfer-Encoding');
    return got[1];
  }
}

/** tchar (RFC 9110 5.6.2), by character code: the characters of a field name. */
const TCHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
  TCHAR[c.charCodeAt(0)] = 1;

/**
 * Reads the field line `text[start, end)`, `name ":" OWS value OWS` (RFC 9112 5), and appends
 * its name and value to `out`; false when it is malformed. The value may hold tabs, visible
 * ASCII and obs-text (0x80-0xff); no other control character, so no bare CR or LF. A character
 * loop rather than a regular expression: this runs for every header of every response.
 */
function pushField(text: string, start: number, end: number, out: string[]): boolean {
  let colon = start;
  while (colon < end) {
    const c = text.charCodeAt(colon);
    if (c === 0x3a) break;
    if (c > 0x7f || TCHAR[c] === 0) return false;
    colon++;
  }
  if (colon === start || colon === end) return false;
  let from = colon + 1;
  let to = end;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return false;
  }
  while (from < to && (text.charCodeAt(from) === 0x20 || text.charCodeAt(from) === 0x09)) from++;
  while (to > from && (text.charCodeAt(to - 1) === 0x20 || text.charCodeAt(to - 1) === 0x09)) to--;
  out.push(text.slice(start, colon), text.slice(from, to));
  return true;
}

function bad(message: string) {
  return new ResponseParseError(`the upstream sent a malformed response: ${message}`);
}
