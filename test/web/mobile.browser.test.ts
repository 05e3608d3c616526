import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { PushService, Subscriber } from '../kit/push.js';
import { freePort } from '../net.js';
import { expectAccessibleBothSchemes } from './axe.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the browser tests of mobile push are skipped ***\n\n`);
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';
const PHONE_UA =
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36';

/**
 * Mobile push in Chromium: the laptop's sign-in page sends the request and shows the number; the
 * push service started here receives the encrypted message, the test decrypts it with the
 * subscription's keys (as the phone's browser would) and opens the approvals page on the "phone"
 * (another browser context), which types the number and approves. Headless Chromium has no push
 * service of its own, so the subscription is the test's; the app page's registration button is
 * shown, not exercised.
 */
describe.skipIf(!HAVE_CHROMIUM)(`mobile push pages in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let push: PushService;
  let browser: Browser;
  let base: string;
  let page: Page;
  let phonePage: Page;
  const sub = { current: undefined as Subscriber | undefined };
  const email = 'alex@example.com';

  beforeAll(async () => {
    push = await PushService.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    s = await startTestService(backends()[0] ?? 'sqlite', { SVC_PUSH_ENDPOINTS: push.origin });
    await s.app.listen({ port, host: '127.0.0.1' });
    const u = await s.req({ method: 'POST', url: '/users', payload: { Email: email, Active: true } });
    const id = String(u.headers['x-id']);
    expect(
      (await s.req({ method: 'PUT', url: `/auth/enroll/password?user=${id}`, payload: { Password: PW } }))
        .statusCode,
    ).toBe(204);
    // The phone's subscription, registered by an administrator's reset (the phone's own page would
    // do it with pushManager.subscribe, which needs a real push service).
    sub.current = new Subscriber(push.origin);
    const reg = await s.req({
      method: 'POST',
      url: `/auth/enroll/mobile?user=${id}`,
      payload: { Name: 'Pixel 8', Subscription: sub.current.toJSON() },
    });
    expect(reg.statusCode, reg.body).toBe(201);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await (await browser.newContext({ viewport: { width: 960, height: 720 } })).newPage();
    phonePage = await (
      await browser.newContext({ viewport: { width: 420, height: 820 }, userAgent: PHONE_UA })
    ).newPage();
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
    await push?.close();
  });

  /** A screenshot, and the accessibility check (axe, light and dark) at the same point. */
  const shot = async (p: Page, name: string) => {
    await p.screenshot({ path: `${SHOTS}${name}.png` });
    await expectAccessibleBothSchemes(p, name);
  };

  it('password, then a push approved on the phone by typing the number shown', async () => {
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/enroll')}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    const before = push.received.length;
    await page.getByRole('button', { name: 'Send a request to my phone' }).click();
    await page.locator('#mobile-number', { hasText: /^\d\d$/ }).waitFor();
    const number = (await page.locator('#mobile-number').textContent()) ?? '';
    await shot(page, 'signin-mobile-wait');
    const received = await push.next((sub.current as Subscriber).path, before);
    const msg = JSON.parse((sub.current as Subscriber).decrypt(received.body)) as {
      Token: string;
      Email: string;
    };
    expect(msg.Email).toBe(email);

    // What the notification tap opens on the phone.
    await phonePage.goto(`${base}/signin/mobile#${encodeURIComponent(msg.Token)}`);
    await phonePage.getByText('Someone asked to sign in as').waitFor();
    expect(await phonePage.locator('#mreq-browser').textContent()).toMatch(/Chrome \d+ on Linux/);
    expect(phonePage.url()).toBe(`${base}/signin/mobile`);
    await phonePage.getByLabel('Number shown on the sign-in page').fill(number.trim());
    await shot(phonePage, 'mobile-approve');
    await phonePage.getByRole('button', { name: 'Approve' }).click();
    await phonePage.getByText('Approved.').waitFor();

    await page.waitForURL(`${base}/signin/enroll`, { timeout: 10_000 });
    const auth = await page.request.post(`${base}/auth`, { headers: { 'X-Requested-With': 'test' } });
    expect(await auth.json()).toMatchObject({ IntegrityLevel: 3, Proven: ['password', 'mobile'] });
    await page.locator('#st-mobile', { hasText: /^set up$/ }).waitFor();
    await page.locator('#h-mobile').scrollIntoViewIfNeeded();
    await shot(page, 'enroll-mobile');

    // The approvals app's own page offers to register the device (manifest and service worker served).
    await phonePage.goto(`${base}/signin/mobile`);
    await phonePage.getByRole('button', { name: 'Use this device for sign-in approvals' }).waitFor();
    await shot(phonePage, 'mobile-app');
    const manifest = await phonePage.request.get(`${base}/signin/mobile.webmanifest`);
    expect(await manifest.json()).toMatchObject({ start_url: '/signin/mobile', display: 'standalone' });
    const sw = await phonePage.request.get(`${base}/signin/mobile-sw.js`);
    expect(await sw.text()).toMatch(/addEventListener\(["']push["']/);
  }, 90_000);
});
