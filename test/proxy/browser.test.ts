import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../src/objects/app.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { makeUser } from '../auth/client.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from './harness.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the proxy browser test is skipped ***\n\n`);
}
const PW = 'proxy browser test password';

describe.skipIf(!HAVE_CHROMIUM)(`proxy sign-in in headless Chromium (${backends()[0]})`, () => {
  let w: World;
  let p: RunningProxy;
  let browser: Browser;
  beforeAll(async () => {
    w = await startWorld(backends()[0] ?? 'sqlite');
    // The service as "localhost" and the proxy as "127.0.0.1": two sites, two cookie jars.
    const service = w.serviceUrl.replace('127.0.0.1', 'localhost');
    p = await w.proxy({ env: { SVC_AUTH_SERVER: service } });
    await w.s.store.systemPut(App, w.appId, (doc) => ({ doc: { ...(doc ?? {}), AllowedOrigins: [p.url] } }));
    await makeUser(w.s, { email: 'lin@example.com', password: PW });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await w?.close();
  });

  it('visits a protected page, signs in on the service pages and lands back on the page', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${p.url}/wiki/page?id=7`);
    // At the service's sign-in page now.
    expect(new URL(page.url()).pathname).toBe('/signin');
    await page.getByLabel('E-mail address').fill('lin@example.com');
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL(`${p.url}/wiki/page?id=7`);
    const echoed = JSON.parse((await page.locator('body').textContent()) ?? '{}');
    expect(echoed.url).toBe('/wiki/page?id=7');
    expect(echoed.headers['x-service-auth-type']).toBe('session');
    expect(echoed.headers['x-service-email']).toBe('lin@example.com');
    const cookies = await page.context().cookies(p.url);
    const mine = cookies.find((c) => c.name === 'gatehouse_proxy');
    expect(mine?.httpOnly).toBe(true);
    expect(mine?.sameSite).toBe('Lax');
    // A second page needs no new sign-in.
    await page.goto(`${p.url}/wiki/other`);
    expect(JSON.parse((await page.locator('body').textContent()) ?? '{}').url).toBe('/wiki/other');
  }, 60_000);
});
