/**
 * Second-afternoon audit: the Host header deciding a URL the service hands out (finding 2's
 * class, there at the proxy's access-check URL), at the service.
 *
 * The sign-in redirects of the access-request pages (/signin/groups/:id, /signin/approvals) and
 * of the proxy sign-in start (/proxy/v1/signin) built their `return=` URL from the request's
 * Host (or X-Forwarded-Host behind a trusted proxy): `Host: evil.example` made the service send
 * the browser to `/signin?return=http://evil.example/...`. The sign-in page refuses such a
 * return today, but only because its own check happens to use the same Host; a cache or a
 * sign-in site on another origin (Tenant.SigninURL) sees the forged URL. When the sign-in pages
 * are on this service (no SigninURL), the return is now a path: nothing the client sends is in it.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create } from '../groups/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';

const CALLBACK = 'https://wiki.example.com/.gatehouse/callback';

/** Header names an attacker uses to claim another host or scheme, in some spellings. */
const hostHeader = fc.constantFrom(
  'host',
  'x-forwarded-host',
  'X-Forwarded-Host',
  'x-forwarded-server',
  'x-host',
  'forwarded',
  'x-original-host',
);
const evilHost = fc.constantFrom(
  'evil.example',
  'evil.example:443',
  'EVIL.example',
  'evil.example, localhost',
  'localhost, evil.example',
  'evil.example.',
  'host=evil.example',
  'for=1.2.3.4;host=evil.example;proto=https',
);
const headerSet = fc
  .tuple(fc.array(fc.tuple(hostHeader, evilHost), { minLength: 1, maxLength: 3 }), fc.boolean())
  .map(([pairs, https]) => {
    const h: Record<string, string> = {};
    for (const [k, v] of pairs) h[k] = v;
    if (https) h['x-forwarded-proto'] = 'https';
    return h;
  });

describe.each(backends())('URLs the service builds do not come from Host on %s', (backend) => {
  for (const trusted of [false, true]) {
    describe(trusted ? 'behind a trusted proxy (server.trustproxy)' : 'without server.trustproxy', () => {
      let s: TestService;
      let group: string;
      let app: string;
      beforeAll(async () => {
        s = await startTestService(backend, trusted ? { SVC_SERVER_TRUSTPROXY: '127.0.0.1' } : {});
        group = await create(s, 'groups', { Name: 'hosted' });
        app = await create(s, 'apps', { Name: 'wiki', URL: 'https://wiki.example.com' });
        expect((await s.req({ method: 'POST', url: `/apps/${app}/proxytoken` })).statusCode).toBe(201);
      });
      afterAll(async () => s?.close());

      const targets = () => [
        { method: 'GET' as const, url: `/signin/groups/${group}?next=${encodeURIComponent('/after')}` },
        { method: 'GET' as const, url: '/signin/approvals' },
        {
          method: 'GET' as const,
          url: `/proxy/v1/signin?${new URLSearchParams({ app, state: 'state-0123456789abcdef', return: CALLBACK })}`,
        },
      ];

      it('no header spelling puts another host into a sign-in redirect (generated)', async () => {
        await fc.assert(
          fc.asyncProperty(headerSet, fc.integer({ min: 0, max: 2 }), async (headers, which) => {
            const t = targets()[which] as { method: 'GET'; url: string };
            const res = await s.req({ ...t, key: '', headers });
            expect([302, 303], `${t.url} ${JSON.stringify(headers)}: ${res.body}`).toContain(res.statusCode);
            const location = String(res.headers.location);
            expect(location.toLowerCase(), JSON.stringify(headers)).not.toContain('evil');
            const back = new URL(location, 'http://service.invalid').searchParams.get('return') ?? '';
            expect(back.startsWith('/'), location).toBe(true);
          }),
          { numRuns: 60 },
        );
      });

      it('the return path brings the browser back to the same page', async () => {
        for (const t of targets()) {
          const res = await s.req({ ...t, key: '', headers: { host: 'evil.example' } });
          const back = new URL(String(res.headers.location), 'http://service.invalid').searchParams.get(
            'return',
          );
          expect(back).toBe(t.url);
        }
      });
    });
  }
});
