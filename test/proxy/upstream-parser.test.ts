import { describe, expect, it } from 'vitest';
import {
  MAX_HEAD_BYTES,
  type ResponseHead,
  ResponseParseError,
  ResponseParser,
} from '../../src/proxy/upstream/response.js';

/** Feeds `input` in pieces of `step` bytes (0: all at once); returns what the parser reported. */
function parse(input: string | Buffer, opts: { step?: number; noBody?: boolean; eof?: boolean } = {}) {
  const heads: ResponseHead[] = [];
  const body: Buffer[] = [];
  let ended = 0;
  const p = new ResponseParser({
    onHead: (h) => heads.push(h),
    onBody: (c) => body.push(Buffer.from(c)),
    onEnd: () => ended++,
  });
  p.start(opts.noBody ?? false);
  const data = typeof input === 'string' ? Buffer.from(input, 'latin1') : input;
  const step = opts.step || data.length;
  let used = 0;
  for (let at = 0; at < data.length && !p.done; at += step) used += p.feed(data.subarray(at, at + step));
  if (opts.eof) p.eof();
  return { heads, body: Buffer.concat(body).toString('latin1'), ended, used, parser: p };
}

const expectMalformed = (input: string, message: RegExp, opts = {}) =>
  expect(() => parse(input, opts)).toThrow(message);

describe('upstream response parser', () => {
  const sized = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world';
  const chunked =
    'HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n' +
    '5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n';

  it('reads a sized and a chunked response, whole or split at every byte', () => {
    for (const step of [0, 1, 2, 3, 7]) {
      const a = parse(sized, { step });
      expect(a.heads).toEqual([
        {
          status: 200,
          headers: ['Content-Type', 'text/plain', 'Content-Length', '11'],
          keepAlive: true,
          keepAliveTimeoutS: undefined,
        },
      ]);
      expect(a.body).toBe('hello world');
      expect(a.ended).toBe(1);
      const b = parse(chunked, { step });
      expect(b.heads[0]?.status).toBe(201);
      expect(b.heads[0]?.headers).toEqual(['Transfer-Encoding', 'chunked', 'X-A', '1']);
      expect(b.body).toBe('hello world');
      expect(b.ended).toBe(1);
      expect(b.parser.reusable).toBe(true);
    }
  });

  it('knows which responses have no body: HEAD, 204, 304, and 1xx before the final one', () => {
    const head = parse('HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n', { noBody: true });
    expect(head.ended).toBe(1);
    expect(head.heads[0]?.headers).toEqual(['Content-Length', '500']);
    expect(parse('HTTP/1.1 204 No Content\r\n\r\n').ended).toBe(1);
    expect(parse('HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n').ended).toBe(1);
    const early = parse(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
      { step: 5 },
    );
    expect(early.heads.map((h) => h.status)).toEqual([100, 103, 200]);
    expect(early.body).toBe('ok');
    expect(early.ended).toBe(1);
  });

  it('decides keep-alive from the version and Connection, and reads the Keep-Alive hint', () => {
    expect(
      parse('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').heads[0]?.keepAlive,
    ).toBe(false);
    expect(parse('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').heads[0]?.keepAlive).toBe(false);
    const kept = parse(
      'HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 0\r\n\r\n',
    );
    expect(kept.heads[0]).toMatchObject({ keepAlive: true, keepAliveTimeoutS: 5 });
    // No length and not chunked: the body runs until the server closes; never reused.
    const untilClose = parse('HTTP/1.1 200 OK\r\n\r\nsome bytes', { eof: true });
    expect(untilClose.heads[0]?.keepAlive).toBe(false);
    expect(untilClose.body).toBe('some bytes');
    expect(untilClose.ended).toBe(1);
  });

  it('trims optional whitespace around values, keeps tabs inside them, and joins Connection values', () => {
    const r = parse(
      'HTTP/1.1 200 OK\r\nX-A:\t  a \t b \t\r\nX-Empty:\r\nConnection: X-Hop\r\nconnection: keep-alive\r\nContent-Length: 0\r\n\r\n',
    );
    expect(r.heads[0]?.headers).toEqual([
      'X-A',
      'a \t b',
      'X-Empty',
      '',
      'Connection',
      'X-Hop',
      'connection',
      'keep-alive',
      'Content-Length',
      '0',
    ]);
    expect(r.heads[0]?.connection).toBe('X-Hop,keep-alive');
    expect(parse(sized).heads[0]?.connection).toBeUndefined();
  });

  it('reports bytes that follow the end of the response', () => {
    const r = parse(`${sized}HTTP/1.1 200 OK\r\n`);
    expect(r.ended).toBe(1);
    expect(r.used).toBe(sized.length);
  });

  it('keeps header bytes outside ASCII as they were sent (latin1 strings)', () => {
    const bytes = Buffer.concat([
      Buffer.from('HTTP/1.1 200 OK\r\nContent-Disposition: attachment; filename="', 'latin1'),
      Buffer.from('José.txt', 'utf8'),
      Buffer.from('"\r\nContent-Length: 0\r\n\r\n', 'latin1'),
    ]);
    const value = parse(bytes).heads[0]?.headers[1] as string;
    expect(Buffer.from(value, 'latin1').toString('utf8')).toBe('attachment; filename="José.txt"');
  });

  it('refuses responses whose end would be ambiguous (request smuggling towards the client)', () => {
    expectMalformed('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n', /both/);
    expectMalformed(
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
      /Content-Length/,
    );
    expectMalformed('HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello', /Content-Length/);
    expectMalformed('HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n', /Content-Length/);
    expectMalformed('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', /Content-Length/);
    expectMalformed('HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello', /Content-Length/);
    expectMalformed('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', /chunked/);
    expectMalformed(
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n',
      /chunked/,
    );
    expectMalformed('HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', /chunked/);
    // The same number twice is one length, not an ambiguity.
    expect(parse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok').body).toBe('ok');
  });

  it('refuses malformed heads', () => {
    expectMalformed('HTTP/1.1 20 OK\r\n\r\n', /status line/);
    expectMalformed('HTTP/2 200 OK\r\n\r\n', /status line/);
    expectMalformed('ICY 200 OK\r\n\r\n', /status line/);
    expectMalformed('HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-A : x\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-A: x\r\n folded\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-A: x\ny\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-A: x\ry\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-A: a\0b\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-A: a\x7fb\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\n: no name\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nno-colon\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-\xe9: x\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 200 OK\r\nX-(A): x\r\n\r\n', /header line/);
    expectMalformed('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n', /101/);
  });

  it('refuses malformed chunks', () => {
    const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
    expectMalformed(`${head}-1\r\nx\r\n0\r\n\r\n`, /chunk-size/);
    expectMalformed(`${head}0x5\r\nhello\r\n0\r\n\r\n`, /chunk-size/);
    expectMalformed(`${head}zz\r\n`, /chunk-size/);
    expectMalformed(`${head}${'f'.repeat(13)}\r\n`, /chunk-size/);
    expectMalformed(`${head}5\nhello\r\n0\r\n\r\n`, /CRLF/);
    expectMalformed(`${head}5\r\nhelloXX0\r\n\r\n`, /CRLF/);
    expectMalformed(`${head}0\r\nbad trailer\r\n\r\n`, /trailer/);
  });

  it('bounds what it buffers: the head, a chunk-size line, the trailers', () => {
    const big = `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`;
    expect(() => parse(big, { step: 4096 })).toThrow(ResponseParseError);
    expect(() => parse(big)).toThrow(/head is larger/);
    const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
    expectMalformed(`${head}5;${'x'.repeat(2000)}`, /chunk-size line is longer/, { step: 100 });
    const trailers = Array.from({ length: 2000 }, (_, i) => `X-T${i}: ${'v'.repeat(10)}\r\n`).join('');
    expectMalformed(`${head}0\r\n${trailers}\r\n`, /trailer section is longer/, { step: 512 });
  });
});
