/**
 * Regression: what decides a request at the access proxy is what the upstream reads. The request
 * line in odd spellings, Host lines doubled or missing, reserved headers in other spellings, and
 * requests pipelined behind an authenticated one: each is refused, or forwarded exactly as the
 * proxy routed and authenticated it, never with an identity the proxy did not write.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backends } from '../helpers.js';
import type { Recorded } from './raw.js';
import { refused, upstreamIsClean, useProxyWorld } from './regression-world.js';

describe.each(backends())('proxy request lines, hosts and header spellings on %s', (backend) => {
  const t = useProxyWorld(backend);
  const attack = (text: string, responses = 1) => t.attack(text, responses);

  it('Host duplicated or absent: refused, or routed and forwarded by one and the same Host', async () => {
    // open.test lets anonymous requests through; the proxy's own address requires identity. Two
    // Host lines must not let the proxy route by the open one while the app reads the other.
    const upstreamAuthority = new URL(t.up.url).host;
    const hostsSeen = (r: Recorded) => {
      const lines = r.rawHeaders.flatMap((v, i) =>
        i % 2 === 0 ? [[v.toLowerCase(), r.rawHeaders[i + 1]]] : [],
      );
      expect(lines.filter(([n]) => n === 'host')).toHaveLength(1);
      expect(lines.filter(([n]) => n === 'x-forwarded-host').length).toBeLessThanOrEqual(1);
      // The client's Host as the upstream may read it: X-Forwarded-Host, and Host unless the proxy
      // replaced it with the upstream's own authority.
      const names = [
        r.headers['x-forwarded-host'],
        r.headers.host === upstreamAuthority ? undefined : r.headers.host,
      ];
      return new Set(
        names.filter((n): n is string => n !== undefined).map((n) => n.toLowerCase().replace(/:\d+$/, '')),
      );
    };
    const hostLines = fc.constantFrom('open.test', 'OPEN.test:80', t.host, 'b.example');
    await fc.assert(
      fc.asyncProperty(
        fc.array(hostLines, { minLength: 2, maxLength: 3 }),
        fc.constantFrom('Host', 'host', 'HOST'),
        async (hosts, name) => {
          const out = await attack(
            `GET /page HTTP/1.1\r\n${hosts.map((h) => `${name}: ${h}\r\n`).join('')}X-Service-User: forged\r\n\r\n`,
          );
          expect(out.statuses).toHaveLength(1);
          if (out.statuses[0] !== 200) {
            expect([400, 401]).toContain(out.statuses[0]);
            expect(out.seen).toEqual([]);
            return;
          }
          // Forwarded without identity: only open.test allows that, and the upstream hears of no other host.
          expect(out.seen).toHaveLength(1);
          expect([...hostsSeen(out.seen[0] as Recorded)]).toEqual(['open.test']);
          upstreamIsClean(out.seen);
        },
      ),
      { numRuns: 30 },
    );
    refused(await attack('GET /public/x HTTP/1.1\r\nX-Service-User: forged\r\n\r\n'));
    // HTTP/1.0 may omit Host: the proxy names the upstream itself and claims no forwarded host.
    const old = await attack('GET /public/x HTTP/1.0\r\nX-Service-User: forged\r\n\r\n');
    expect(old.statuses).toEqual([200]);
    expect(old.seen[0]?.headers.host).toBe(upstreamAuthority);
    expect(old.seen[0]?.headers['x-forwarded-host']).toBeUndefined();
    upstreamIsClean(old.seen);
  });

  // Was open on main: header names spelled with "_" for "-" passed the reserved-name filter and
  // reached the upstream. CGI, PHP, Rack, WSGI and nginx with underscores_in_headers read
  // X_Service_User as X-Service-User: a forged identity; and Transfer_Encoding next to the proxy's
  // own Content-Length is a desync for such an upstream. isReserved (src/proxy/http.ts) now compares
  // canonical names (test/security/proxy-headers.test.ts generates more spellings).
  it('reserved and framing headers spelled with "_" or mixed case never reach the upstream', async () => {
    const names = [
      'X-Service-User',
      'X-Remote-User',
      'X-Forwarded-For',
      'Transfer-Encoding',
      'Content-Length',
    ];
    const spelling = fc
      .tuple(
        fc.constantFrom(...names),
        fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
        fc.boolean(),
      )
      .map(([name, upper, under]) =>
        [...name]
          .map((c, i) => (c === '-' && under ? '_' : upper[i % 20] ? c.toUpperCase() : c.toLowerCase()))
          .join(''),
      );
    await fc.assert(
      fc.asyncProperty(spelling, async (name) => {
        const out = await attack(`GET /public/x HTTP/1.1\r\nHost: ${t.host}\r\n${name}: forged\r\n\r\n`);
        for (const r of out.seen) {
          const canonical = r.rawHeaders
            .filter((_, i) => i % 2 === 0)
            .map((n) => n.toLowerCase().replace(/_/g, '-'));
          for (const n of names.map((x) => x.toLowerCase()))
            expect(canonical.filter((c) => c === n).length, name).toBeLessThanOrEqual(1);
          upstreamIsClean([r]);
        }
      }),
      { numRuns: 40 },
    );
  });

  it('pipelined requests on one connection are each authenticated on their own', async () => {
    // A credential on the first request of a keep-alive connection must not carry over to the next.
    await fc.assert(
      fc.asyncProperty(fc.array(fc.boolean(), { minLength: 2, maxLength: 5 }), async (withKey) => {
        const text = withKey
          .map(
            (k, i) =>
              `GET /app/p${i} HTTP/1.1\r\nHost: ${t.host}\r\nX-Service-User: forged\r\n` +
              (k ? `Authorization: Bearer ${t.w.userKey}\r\n` : '') +
              '\r\n',
          )
          .join('');
        const out = await attack(text, withKey.length);
        expect(out.statuses).toEqual(withKey.map((k) => (k ? 200 : 401)));
        const expected = withKey.flatMap((k, i) => (k ? [`/app/p${i}`] : []));
        expect(out.seen.map((r) => r.url)).toEqual(expected);
        upstreamIsClean(out.seen, expected.length, t.w.user.id);
      }),
      { numRuns: 15 },
    );
  });

  it('generated request lines: odd spacing, versions and method spellings never reach a protected path anonymously', async () => {
    // A parser that splits the request line differently from the upstream's reads another path
    // or version; the anonymous request must end at the proxy unless its path is an open one.
    const line = fc.record({
      method: fc.constantFrom('GET', 'get', 'Get', 'GET\t', 'G ET', 'POST'),
      sp1: fc.constantFrom(' ', '  ', '\t', ' \t'),
      path: fc.constantFrom(
        '/app/x',
        '/public/x',
        '/public/../app/x',
        '/public/%2e%2e/app/x',
        '/app/x?/public/',
      ),
      sp2: fc.constantFrom(' ', '  ', '\t', ''),
      version: fc.constantFrom(
        'HTTP/1.1',
        'HTTP/1.0',
        'http/1.1',
        'HTTP/1.2',
        'HTTP/2.0',
        'HTTP/1.1 ',
        'HTTP/1.10',
        'HTTP/01.1',
        '',
      ),
    });
    await fc.assert(
      fc.asyncProperty(line, async (l) => {
        const text = `${l.method}${l.sp1}${l.path}${l.sp2}${l.version}\r\nHost: ${t.host}\r\nX-Service-User: forged\r\n\r\n`;
        const out = await attack(text);
        upstreamIsClean(out.seen);
        for (const r of out.seen) expect(r.url.startsWith('/public/')).toBe(true);
        for (const st of out.statuses) expect([200, 400, 401, 404, 405, 505]).toContain(st);
      }),
      { numRuns: 80 },
    );
  });
});
