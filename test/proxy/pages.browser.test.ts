/**
 * The proxy's error pages in headless Chromium: 401 (forward auth, with the sign-in link), 403 for
 * a user the App is closed to (naming the App, linking to its access-request page, never its ID),
 * 404 and 502, each checked with axe-core in both colour schemes and screenshotted
 * (UPDATE_SCREENSHOTS=1 writes docs/screenshots/proxy-*.png).
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProxyConfig } from '../../src/config/proxy.js';
import { type AuthBackend, BackendError } from '../../src/proxy/backend.js';
import { type RunningProxy, startProxy } from '../../src/proxy/run.js';
import { APP_REFUSED_CODE } from '../../src/wire/proxy.js';
import { expectAccessibleBothSchemes } from '../web/axe.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI === 'true') throw new Error(`${CHROMIUM} is missing and CI=true: install it`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the proxy error page test is skipped ***\n\n`);
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-proxy-shots-'))}/`;
const ACCESS = 'https://id.example.com/signin/groups/g7wiki?next=https%3A%2F%2Fwiki.example.com%2F';
const KEY = `gv${'A'.repeat(54)}`;

describe.skipIf(!HAVE_CHROMIUM)('the proxy error pages in headless Chromium', () => {
  let p: RunningProxy;
  let browser: Browser;
  beforeAll(async () => {
    // A back channel that knows the App's name and access-request page and refuses the key as
    // the service refuses a user outside App.AccessGroups.
    const backend = {
      publicUrl: 'https://id.example.com',
      register: async () => ({
        AppID: 'a1b2c3internal',
        AppName: 'Team wiki',
        RemoteAgentID: 'r1',
        VirtualHosts: [],
        ProxyAuth: '',
        Hosts: [],
        AccessRequestURL: ACCESS,
      }),
      apiKey: async () => {
        throw new BackendError(
          403,
          APP_REFUSED_CODE,
          'this user may not use App a1b2c3internal: it is open to active members of its AccessGroups only',
        );
      },
      close: async () => {},
    } as unknown as AuthBackend;
    p = await startProxy(
      loadProxyConfig({
        env: {
          SVC_PROXY_TLS: 'false',
          SVC_PROXY_LISTEN: '127.0.0.1:0',
          SVC_PROXY_UPSTREAM: 'http://127.0.0.1:1',
          SVC_AUTH_TOKEN: `gp.a1b2c3internal.${'x'.repeat(43)}`,
          SVC_PATH_open_AUTH: 'none',
        },
      }),
      { logger: pino({ level: 'silent' }), backend },
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await p?.close();
  });

  const pages: [string, string, Record<string, string>, number, RegExp][] = [
    ['proxy-403', '/wiki/page', { authorization: `Bearer ${KEY}` }, 403, /Team wiki/],
    [
      'proxy-401',
      '/.gatehouse/authz/auth-request',
      { 'x-original-url': 'http://wiki.example.com/page', 'x-original-method': 'GET' },
      401,
      /Sign in/,
    ],
    ['proxy-404', '/.gatehouse/nothing-here', {}, 404, /Not found/],
    ['proxy-502', '/open/page', {}, 502, /cannot be reached/],
  ];

  for (const [name, path, headers, status, text] of pages)
    it(`${status}: a page in the sign-in pages' design, accessible in both schemes`, async () => {
      const context = await browser.newContext({ extraHTTPHeaders: headers });
      const page = await context.newPage();
      const res = await page.goto(`${p.url}${path}`);
      expect(res?.status()).toBe(status);
      const body = (await page.locator('main').textContent()) ?? '';
      expect(body).toMatch(text);
      expect(body).not.toContain('a1b2c3internal');
      expect(await page.locator('h1').count()).toBe(1);
      if (status === 403) {
        const link = page.getByRole('link', { name: 'Ask for access' });
        expect(await link.getAttribute('href')).toBe(ACCESS);
        expect(res?.headers().location).toBe(ACCESS);
      }
      if (status === 401)
        expect(await page.getByRole('link', { name: 'Sign in' }).getAttribute('href')).toMatch(
          /^https:\/\/id\.example\.com\/proxy\/v1\/signin\?/,
        );
      await expectAccessibleBothSchemes(page, name);
      await page.screenshot({ path: `${SHOTS}${name}.png` });
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.screenshot({ path: `${SHOTS}${name}-dark.png` });
      await context.close();
    }, 30_000);
});
