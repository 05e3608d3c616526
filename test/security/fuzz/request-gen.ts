/**
 * Generated request streams for the request-side differential (request.ts): one to three
 * pipelined requests with odd request lines, headers (reserved names in other spellings,
 * hop-by-hop ones, obs-fold), framing in every combination and bodies that hold requests, then
 * perhaps a cut-short request or junk.
 */
import fc from 'fast-check';
import {
  eolWith,
  fieldLine,
  foldLine,
  framedWith,
  insertAt,
  pick,
  sometimes,
  withRareWeight,
} from './gen.js';

export interface RequestCase {
  /** Raw requests sent back to back on one connection; the last may be cut short or junk. */
  requests: string[];
}

/**
 * One request: request line, headers (Host, ordinary, reserved names in other spellings, hop-by-hop),
 * framing and body; rare spellings at `rareWeight` in 20 at each choice.
 */
function buildRequest(rareWeight: number): fc.Arbitrary<string> {
  return withRareWeight(rareWeight, () => {
    const method = pick(
      ['GET', 'GET', 'POST', 'PUT', 'HEAD', 'DELETE'],
      [
        'OPTIONS',
        'PATCH',
        'TRACE',
        'CONNECT',
        'PURGE',
        'QUERY',
        'SEARCH',
        'M-SEARCH',
        'get',
        'G ET',
        '',
        'PRI',
        'GET\x00',
        'ACL',
      ],
    );
    const segment = pick(
      ['a', 'b', 'app', 'x.y'],
      [
        '.',
        '..',
        '%2e',
        '%2E%2e',
        '%2f',
        '%5c',
        '\\',
        'b;c',
        '%00',
        '%zz',
        '~',
        '\xe9',
        '%25',
        '',
        '.%2e',
        '..;',
        '%c0%ae',
        '%252e',
        '%41',
      ],
    );
    const target = fc.oneof(
      {
        weight: 8,
        arbitrary: fc
          .tuple(
            fc.array(segment, { minLength: 1, maxLength: 4 }),
            pick([''], ['?x=1', '?a=%2e%2e/', '?', '?x=/../', '#frag', '?x=1#f']),
          )
          .map(([s, q]) => `/${s.join('/')}${q}`),
      },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          '*',
          'http://evil.example/x',
          '//evil/x',
          '',
          'x',
          '/.gatehouse/signin',
          'HTTP://a/b',
        ),
      },
    );
    const requestLine = fc
      .record({
        method,
        sp: pick([' '], ['  ', '\t']),
        target,
        version: pick(
          ['HTTP/1.1'],
          ['HTTP/1.0', 'HTTP/0.9', 'HTTP/2.0', 'HTTP/1.2', 'http/1.1', 'HTTP/1.1 ', 'HTTP/1.10', 'HTTP/11'],
        ),
        eol: eolWith(rareWeight),
      })
      .map((r) => `${r.method}${r.sp}${r.target}${r.sp}${r.version}${r.eol}`);

    const host = pick(
      ['Host: app.example\r\n'],
      [
        '',
        'Host: app.example\r\nHost: other.example\r\n',
        'Host: \r\n',
        'host:app.example\r\n',
        'Host: a@b\r\n',
        'Host : app.example\r\n',
        'Host: a b\r\n',
      ],
    );

    /** Reserved names in the spellings upstream frameworks fold together: case, "_" or "." for "-". */
    const spoofed = fc
      .record({
        name: fc.constantFrom(
          'x-service-user',
          'x-service-email',
          'x-forwarded-for',
          'x-remote-user',
          'forwarded',
          'x-forwarded-host',
          'x-service-access-check',
          'x-service-auth-type',
        ),
        sep: pick(['-'], ['_', '.']),
        upper: fc.boolean(),
      })
      .map(({ name, sep, upper }) => `${(upper ? name.toUpperCase() : name).replace(/-/g, sep)}: forged\r\n`);

    const hopLine = pick(
      ['Connection: keep-alive\r\n'],
      [
        'Connection: close\r\n',
        'Connection: x-a\r\nX-A: gone\r\n',
        'Keep-Alive: timeout=5\r\n',
        'TE: trailers\r\n',
        'Trailer: X-T\r\n',
        'Upgrade: websocket\r\n',
        'Connection: upgrade\r\nUpgrade: websocket\r\n',
        'Expect: 100-continue\r\n',
        'Proxy-Connection: keep-alive\r\n',
        'Connection: x-forwarded-for\r\n',
        'Proxy-Authorization: Basic eA==\r\n',
        'Connection: content-type\r\nContent-Type: gone\r\n',
        'Connection: host\r\n',
      ],
    );

    return fc
      .record({
        line: requestLine,
        host,
        fields: fc.array(
          fieldLine(
            ['X-A', 'Content-Type', 'Accept', 'User-Agent', 'X-Custom'],
            ['v', 'text/plain', '*/*', '1', ''],
          ),
          { maxLength: 2 },
        ),
        spoofed: fc.array(spoofed, { maxLength: 2 }),
        hop: sometimes(hopLine, 3),
        fold: sometimes(fc.tuple(fc.nat(), foldLine), 10),
        framed: framedWith(rareWeight),
        at: fc.nat(),
        blank: pick(['\r\n'], ['\n', '\r', ' \r\n']),
      })
      .map((r) => {
        let lines = [r.host, ...r.fields, ...r.spoofed];
        if (r.hop !== null) lines.push(r.hop);
        lines = insertAt(lines, r.at, r.framed.lines);
        if (r.fold !== null) lines = insertAt(lines, r.fold[0] + 1, [r.fold[1]]);
        return `${r.line}${lines.join('')}${r.blank}${r.framed.body}`;
      });
  });
}

export const requestCase: fc.Arbitrary<RequestCase> = fc
  .tuple(
    // Well-formed requests (but for framing combinations), mildly odd ones, and odd ones.
    fc.array(fc.oneof(buildRequest(0), buildRequest(1), buildRequest(3)), { minLength: 1, maxLength: 3 }),
    pick(
      [''],
      [
        'GET /next HTTP/1.1\r\nHost: x\r\n',
        'junk\r\n\r\n',
        '\r\n',
        'POST /cut HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc',
      ],
      2,
    ),
  )
  .map(([requests, tail]) => ({ requests: tail === '' ? requests : [...requests, tail] }));

/** The case's bytes, with `authorization` (a header line) after each request line when given. */
export function caseBytes(c: RequestCase, authorization?: string): Buffer {
  const parts = c.requests.map((r) => {
    if (!authorization) return r;
    const nl = r.indexOf('\n');
    return nl < 0 ? r : `${r.slice(0, nl + 1)}${authorization}${r.slice(nl + 1)}`;
  });
  return Buffer.from(parts.join(''), 'latin1');
}
