import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as OTPAuth from 'otpauth';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { expectAccessibleBothSchemes } from './axe.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(
    `\n*** ${CHROMIUM} not found: the browser tests of the sign-in pages are skipped ***\n\n`,
  );
}
// Screenshots go to docs/screenshots/ only when asked (UPDATE_SCREENSHOTS=1), so ordinary runs
// do not rewrite committed files; otherwise to a temporary directory.
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';

/** A TOTP code for `at`: from oathtool when installed (an independent implementation), else otpauth. */
function totp(secret: string, at: Date): string {
  try {
    const now = `${at.toISOString().replace('T', ' ').slice(0, 19)} UTC`;
    return execFileSync('oathtool', ['--totp', '-b', '--now', now, secret]).toString().trim();
  } catch {
    return OTPAuth.TOTP.generate({ secret: OTPAuth.Secret.fromBase32(secret), timestamp: at.getTime() });
  }
}

// One backend is enough for the pages (the API beneath is tested on both); the first one active.
describe.skipIf(!HAVE_CHROMIUM)(`sign-in pages in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;
  let page: Page;
  const email = 'pat@example.com';

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    const u = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: email, Active: true, Name: { FullName: 'Pat' } },
    });
    const id = String(u.headers['x-id']);
    expect(
      (await s.req({ method: 'PUT', url: `/auth/enroll/password?user=${id}`, payload: { Password: PW } }))
        .statusCode,
    ).toBe(204);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    const context = await browser.newContext({ viewport: { width: 960, height: 720 } });
    page = await context.newPage();
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  // Every page photographed is also checked with axe-core, in both colour schemes.
  const shot = async (name: string, fullPage = false) => {
    await expectAccessibleBothSchemes(page, name);
    await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage });
  };

  it('signs in with a password, enrolls TOTP, signs out, signs in with password + TOTP, uses /debug, signs out', async () => {
    // 1. Sign in with e-mail + password; come back to the security settings page.
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/enroll')}`);
    await page.getByLabel('E-mail address').waitFor();
    await shot('signin-email');
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').waitFor();
    await page.getByLabel('Password').fill(PW);
    await shot('signin-password');
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL(`${base}/signin/enroll`);

    // 2. Enroll TOTP: QR code + key, confirm with a code.
    await page.getByText('not set up').first().waitFor();
    await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
    await page.locator('#totp-qr').waitFor();
    const secret = (await page.locator('#totp-secret').textContent())?.trim() ?? '';
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    await shot('enroll-totp');
    await page.getByLabel('Code shown by the app').fill(totp(secret, new Date()));
    await page.getByRole('button', { name: 'Confirm' }).click();
    await page.getByText('Authenticator app set up.').waitFor();
    // The status line is refreshed after the confirmation appears: wait for it rather than read once.
    await page.locator('#st-totp', { hasText: /^set up$/ }).waitFor({ timeout: 10_000 });
    await shot('enroll', true);

    // 3. Sign out.
    await page.goto(`${base}/signin/signout`);
    await page.getByRole('button', { name: 'Sign out' }).last().click();
    await page.getByText('You are signed out.').waitFor();
    await shot('signout');
    expect((await page.request.get(`${base}/users/me`)).status()).toBe(401);

    // 4. Sign in again: now password AND TOTP are asked for, then the explorer.
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/debug')}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.getByText('You proved your password. One more step is needed to sign in.').waitFor();
    await page.getByLabel('Code from your authenticator app').waitFor();
    expect(await page.getByLabel('Password').isVisible()).toBe(false);
    await shot('signin-totp');
    // The enrollment code's time step is spent (no replay): use the next step's code.
    await page
      .getByLabel('Code from your authenticator app')
      .fill(totp(secret, new Date(Date.now() + 30_000)));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.waitForURL(`${base}/signin/debug`);

    // 5. /debug sends requests with the browser session.
    await page.getByLabel('Path').fill('/users/me');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('#r-status').getByText(/^200 /).waitFor();
    expect(await page.locator('#r-body').textContent()).toContain(email);
    expect(await page.locator('#r-headers').textContent()).toContain('etag');
    await shot('debug', true);
    const auth = await page.request.post(`${base}/auth`, { headers: { 'X-Requested-With': 'test' } });
    expect(await auth.json()).toMatchObject({ IntegrityLevel: 3, Proven: ['password', 'totp'] });

    // 6. Sign out from the page; the session is gone.
    await page.goto(`${base}/signin/signout`);
    await page.getByRole('button', { name: 'Sign out' }).last().click();
    await page.getByText('You are signed out.').waitFor();
    expect((await page.request.get(`${base}/users/me`)).status()).toBe(401);
  }, 90_000);
});
