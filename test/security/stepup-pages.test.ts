import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { type Account, account, PW, totpCode } from '../kit/index.js';

/**
 * Finding 4 through the pages: the security settings page of a session below the user's level
 * gets the step-up 401, the sign-in page asks for the missing factor in the same session, and
 * the retried change goes through. (The API rule itself: credentials.test.ts.)
 */
const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM && process.env.CI)
  throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);

describe.skipIf(!HAVE_CHROMIUM)(`step-up on the security settings page (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;
  let page: Page;
  let a: Account;

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    a = await account(s, { totp: true, tag: 'pages' });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await (await browser.newContext()).newPage();
    // Remove asks for confirmation (a window.confirm): this person says yes.
    page.on('dialog', (d) => void d.accept());
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  it('removing TOTP from a password-only session sends to sign-in for TOTP, then succeeds', async () => {
    // A password-only session in this browser (the API, with the browser's cookies).
    const headers = { 'X-Requested-With': 'test' };
    expect(
      (await page.request.post(`${base}/auth/email`, { form: { email: a.email }, headers })).status(),
    ).toBe(204);
    expect(
      (await page.request.post(`${base}/auth/password`, { form: { password: PW }, headers })).status(),
    ).toBe(204);
    await page.goto(`${base}/signin/enroll`);
    await page.locator('#st-totp', { hasText: /^set up$/ }).waitFor();
    await page.locator('#totp-remove').click();
    // Refused (level 2 of 3): the page goes to sign-in with the intent, which asks for the code.
    await page.waitForURL(/\/signin\?return=%2Fsignin%2Fenroll&intent=/);
    await page.getByLabel('Code from your authenticator app').fill(totpCode(a.totp as string));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    await page.locator('#totp-remove').click();
    await page.getByText('Authenticator app removed.').waitFor();
    await page.locator('#st-totp', { hasText: /^not set up$/ }).waitFor();
    expect((await s.req({ url: `/users/${a.id}` })).json().HaveTOTPSecret).toBe(false);
  }, 60_000);
});
