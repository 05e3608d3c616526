/**
 * Finding 7: open redirect after proxy sign-in. `/.gatehouse/signin?return=/%09/evil.example/x`
 * made the callback answer `Location: /\t/evil.example/x`, which browsers read as
 * "//evil.example/x". One check of return paths (src/core/returnurl.ts) now serves the service's
 * sign-in pages and the proxy (sign-in, callback, the access check's sign-in link).
 *
 * Return values are generated; every accepted one must stay on the origin it is resolved
 * against, as the WHATWG URL parser reads it, after one more decoding, and in headless Chromium.
 */
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import type { FastifyRequest } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProxyConfig } from '../../src/config/proxy.js';
import { isLocalReturnPath } from '../../src/core/returnurl.js';
import type { AuthBackend } from '../../src/proxy/backend.js';
import { safeReturnPath } from '../../src/proxy/http.js';
import { type RunningProxy, startProxy } from '../../src/proxy/run.js';
import { safeReturnUrl } from '../../src/web/returnurl.js';
import { type Echo, startEcho } from '../proxy/harness.js';

const ORIGINS = ['http://proxy.test:8080', 'https://gatehouse.test'];

/** Pieces an attacker strings together into a return value. */
const lead = fc.constantFrom(
  '/',
  '//',
  '///',
  '/\\',
  '\\',
  '\\/',
  '/\t/',
  '/\n/',
  '/\r\n/',
  '/ /',
  '/%09/',
  '/%0a/',
  '/%0d%0a/',
  '/%20/',
  '/%2f/',
  '/%2F',
  '/%5c',
  '/%5C/',
  '/%252f/',
  '/./',
  '/../',
  '/.%2e/',
  '/\u3000/',
  '/\u00a0/',
  '/\u2028/',
  '/\u0085/',
  '/\ufeff/',
  '/\u0000/',
  'http:',
  'http:/',
  'https://',
  'javascript:',
  '',
);
const host = fc.constantFrom('evil.example', 'evil.example:8080', 'user@evil.example', '127.0.0.1', '');
const rest = fc.constantFrom(
  '',
  '/x',
  '/x?y=//evil.example',
  '#//evil.example',
  '?a=1&b=%2f',
  ':80/x',
  '@evil.example/',
);
const returnValue = fc.oneof(
  fc.tuple(lead, host, rest).map(([a, b, c]) => `${a}${b}${c}`),
  fc.tuple(lead, lead, host, rest).map(([a, b, c, d]) => `${a}${b}${c}${d}`),
  fc
    .array(
      fc.constantFrom('/', '\\', '.', '%', '2', 'f', '0', '9', 'a', '\t', ' ', '@', ':', '?', '#', 'e'),
      {
        maxLength: 12,
      },
    )
    .map((cs) => `/${cs.join('')}`),
);

/** How a browser or a server that decodes once more would read `v` against `origin`. */
function readings(v: string, origin: string): string[] {
  const out = [new URL(v, origin).origin];
  try {
    out.push(new URL(decodeURIComponent(v), origin).origin);
  } catch {
    // not decodable: a reader that decodes would refuse it
  }
  return out;
}

const fakeReq = (origin: string) => {
  const u = new URL(origin);
  return { protocol: u.protocol.slice(0, -1), host: u.host } as unknown as FastifyRequest;
};

describe('one return-path check for the project (src/core/returnurl.ts)', () => {
  it('every accepted return value stays on the origin, read by the URL parser or decoded once more', () => {
    fc.assert(
      fc.property(returnValue, (v) => {
        if (!isLocalReturnPath(v)) return;
        for (const origin of ORIGINS)
          for (const o of readings(v, origin)) expect(o, JSON.stringify(v)).toBe(origin);
      }),
      { numRuns: 5000 },
    );
  });

  it('the proxy and the service use it: they accept and refuse the same paths', () => {
    fc.assert(
      fc.property(returnValue, (v) => {
        const ok = isLocalReturnPath(v);
        expect(safeReturnPath(v), JSON.stringify(v)).toBe(ok ? v : '/');
        if (v.startsWith('/'))
          expect(safeReturnUrl(fakeReq(ORIGINS[1] as string), {}, v), JSON.stringify(v)).toBe(ok ? v : '');
      }),
      { numRuns: 2000 },
    );
  });

  it('the reported value and its neighbours are refused; ordinary paths are kept', () => {
    for (const v of [
      '/%09/evil.example/x',
      '/\t/evil.example/x',
      '/\n/evil.example',
      '//evil.example',
      '/\\evil.example',
      '/%2f/evil.example',
      '/%5cevil.example',
      '/%5C%5Cevil.example',
      '/%252f%252fevil.example',
      '/\u3000/evil.example',
      'https://evil.example/',
      'javascript:alert(1)',
      '',
      `/${'a'.repeat(3000)}`,
    ])
      expect(isLocalReturnPath(v), JSON.stringify(v)).toBe(false);
    for (const v of [
      '/',
      '/x',
      '/wiki/page?id=7&next=%2Fa',
      '/a/b#frag',
      '/caf%C3%A9',
      '/a?x=//y',
      '/my%20file',
    ])
      expect(isLocalReturnPath(v), v).toBe(true);
  });
});

// ---- through the proxy: sign-in, service (simulated), callback ------------------------------------

const TOKEN = `gp.app1.${'A'.repeat(43)}`;
const IDENTITY = {
  UserID: 'u1',
  UserName: 'ada',
  Email: 'ada@example.com',
  FullName: 'Ada',
  SessionID: 's1',
};

/** Stands in for the service: /proxy/v1/signin sends the browser straight back with a code. */
async function fakeService() {
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const back = new URL(u.searchParams.get('return') ?? '');
    back.searchParams.set('code', 'one-time-code');
    back.searchParams.set('state', u.searchParams.get('state') ?? '');
    res.writeHead(302, { location: back.toString() });
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('after proxy sign-in, the browser stays on the proxy', () => {
  let echo: Echo;
  let evil: Echo;
  let service: Awaited<ReturnType<typeof fakeService>>;
  let p: RunningProxy;
  beforeAll(async () => {
    echo = await startEcho('app');
    evil = await startEcho('evil');
    service = await fakeService();
    const backend = {
      publicUrl: service.url,
      exchangeCode: async () => IDENTITY,
      close: async () => undefined,
    } as unknown as AuthBackend;
    p = await startProxy(
      loadProxyConfig({
        env: {
          SVC_PROXY_TLS: 'false',
          SVC_PROXY_LISTEN: '127.0.0.1:0',
          SVC_PROXY_UPSTREAM: echo.url,
          SVC_AUTH_TOKEN: TOKEN,
        },
        overrides: ['path_/open/_auth=optional'],
      }),
      { logger: pino({ level: 'silent' }), backend, register: false },
    );
  });
  afterAll(async () => {
    await p?.close();
    await service?.close();
    await evil?.close();
    await echo?.close();
  });

  /** The Location the callback sends the browser to for `ret`. */
  async function landing(ret: string): Promise<string> {
    const start = await fetch(`${p.url}/.gatehouse/signin?${new URLSearchParams({ return: ret })}`, {
      redirect: 'manual',
    });
    expect(start.status).toBe(302);
    const state = new URL(start.headers.get('location') as string).searchParams.get('state') as string;
    const cookie = (start.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const cb = await fetch(`${p.url}/.gatehouse/callback?code=c&state=${state}`, {
      redirect: 'manual',
      headers: { cookie },
    });
    expect(cb.status).toBe(302);
    return cb.headers.get('location') as string;
  }

  it('every generated return value lands on the proxy origin', async () => {
    await fc.assert(
      fc.asyncProperty(returnValue, async (v) => {
        const location = await landing(v);
        for (const o of readings(location, p.url)) expect(o, JSON.stringify({ v, location })).toBe(p.url);
      }),
      { numRuns: 150 },
    );
    expect(await landing('/wiki/page?id=7')).toBe('/wiki/page?id=7');
  });

  it("the access check's sign-in link carries only a safe return path", async () => {
    echo.onCheck = async (url) => {
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ group: 'g1', next: '/%09/evil.example/x' }).toString(),
      });
      return { status: r.status, body: r.headers.get('location') ?? '' };
    };
    try {
      const r = await fetch(`${p.url}/open/check`);
      const out = (await r.json()) as { status: number; body: string };
      expect(out.status).toBe(403);
      const link = new URL(out.body);
      expect(link.origin + link.pathname).toBe(`${p.url}/.gatehouse/signin`);
      const ret = link.searchParams.get('return') ?? '/';
      expect(isLocalReturnPath(ret), ret).toBe(true);
    } finally {
      echo.onCheck = undefined;
    }
  });

  const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
  const HAVE_CHROMIUM = existsSync(CHROMIUM);
  if (!HAVE_CHROMIUM) {
    if (process.env.CI === 'true') throw new Error(`${CHROMIUM} is missing and CI=true`);
    process.stdout.write(`\n*** ${CHROMIUM} not found: the open-redirect browser test is skipped ***\n\n`);
  }

  it.skipIf(!HAVE_CHROMIUM)(
    'in headless Chromium too',
    async () => {
      const { chromium } = await import('playwright-core');
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      });
      try {
        // The other origin is a real listener: a browser that leaves lands there, not on an error.
        const other = `localhost:${evil.port}`;
        for (const v of [
          `/%09/${other}/x`,
          `/\t/${other}/x`,
          `//${other}/x`,
          `/\\${other}/x`,
          `/%2f/${other}/x`,
          `/%5c${other}/x`,
          `/\u3000/${other}/x`,
          '/ok/page?x=1',
        ]) {
          const page = await (await browser.newContext()).newPage();
          await page.goto(`${p.url}/.gatehouse/signin?${new URLSearchParams({ return: v })}`);
          expect(new URL(page.url()).origin, JSON.stringify(v)).toBe(p.url);
          await page.context().close();
        }
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
