import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { codeOf, FakeProvider } from '../kit/pstn.js';
import { freePort } from '../net.js';
import { expectAccessibleBothSchemes } from './axe.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(
    `\n*** ${CHROMIUM} not found: the browser tests of the phone factor are skipped ***\n\n`,
  );
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';
const NUMBER = '+447700900123';

/** The phone factor on the pages, with a fake SMS/voice provider: add and verify, then sign in with it. */
describe.skipIf(!HAVE_CHROMIUM)(`phone pages in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let fake: FakeProvider;
  let browser: Browser;
  let base: string;
  let page: Page;
  const email = 'sam@example.com';

  beforeAll(async () => {
    fake = await FakeProvider.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    s = await startTestService(backends()[0] ?? 'sqlite', fake.env());
    await s.app.listen({ port, host: '127.0.0.1' });
    const u = await s.req({ method: 'POST', url: '/users', payload: { Email: email, Active: true } });
    const id = String(u.headers['x-id']);
    const pw = await s.req({
      method: 'PUT',
      url: `/auth/enroll/password?user=${id}`,
      payload: { Password: PW },
    });
    expect(pw.statusCode).toBe(204);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await (await browser.newContext({ viewport: { width: 960, height: 720 } })).newPage();
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
    await fake?.close();
  });

  /** A screenshot, and the accessibility check (axe, light and dark) at the same point. */
  const shot = async (name: string) => {
    await page.screenshot({ path: `${SHOTS}${name}.png` });
    await expectAccessibleBothSchemes(page, name);
  };

  it('adds and verifies a phone in the settings, then signs in with password + a texted code', async () => {
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/enroll')}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    await page.getByLabel('Phone number with country code').fill('+44 7700 900123');
    let before = fake.requests.length;
    await page.getByRole('button', { name: 'Add phone' }).click();
    await page.getByText(`We sent a code to ${NUMBER}`).waitFor();
    const verifyCode = codeOf(await fake.next(NUMBER, before));
    await page.getByLabel('Code sent to the new phone').fill(verifyCode);
    await page.getByRole('button', { name: 'Verify', exact: true }).click();
    await page.getByText('Phone verified.').waitFor();
    await page.locator('#st-pstn', { hasText: /^set up$/ }).waitFor();
    await page.locator('#h-pstn').scrollIntoViewIfNeeded();
    await shot('enroll-pstn');
    await page.request.post(`${base}/auth/signout`, { headers: { 'X-Requested-With': 'test' } });

    await page.goto(`${base}/signin`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.locator('#pstn-device option').first().waitFor({ state: 'attached' });
    expect(await page.locator('#pstn-device').textContent()).toBe(`Text ${'•'.repeat(NUMBER.length - 3)}23`);
    before = fake.requests.length;
    await page.getByRole('button', { name: 'Send a code' }).click();
    await page.getByText('Code sent.').waitFor();
    const code = codeOf(await fake.next(NUMBER, before));
    await shot('signin-pstn');
    await page.getByLabel('Code from the text message or call').fill(code);
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.locator('#step-done').getByText('Signed in as').waitFor();
    const auth = await page.request.post(`${base}/auth`, { headers: { 'X-Requested-With': 'test' } });
    expect(await auth.json()).toMatchObject({ IntegrityLevel: 3, Proven: ['password', 'pstn'] });
  }, 90_000);
});
