import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { MailSink, signinLink } from '../kit/mail.js';
import { freePort } from '../net.js';
import { expectAccessibleBothSchemes } from './axe.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(
    `\n*** ${CHROMIUM} not found: the browser tests of the e-mail link are skipped ***\n\n`,
  );
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';
const PHONE_UA =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';

/**
 * The e-mail link in two browsers: the laptop asks for a link, the message arrives at a real SMTP
 * server, the phone (another browser context: other cookies, other User-Agent) opens the link,
 * sees which browser asked, and approves or refuses; the laptop's page continues by itself.
 */
describe.skipIf(!HAVE_CHROMIUM)(`e-mail link pages in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let mail: MailSink;
  let browser: Browser;
  let base: string;
  let laptop: BrowserContext;
  let phone: BrowserContext;
  let page: Page;
  const email = 'robin@example.com';

  beforeAll(async () => {
    mail = await MailSink.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    s = await startTestService(backends()[0] ?? 'sqlite', {
      ...mail.env,
      SVC_SERVER_SIGNINURL: `${base}/signin`,
    });
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
    laptop = await browser.newContext({ viewport: { width: 960, height: 720 } });
    phone = await browser.newContext({ viewport: { width: 420, height: 820 }, userAgent: PHONE_UA });
    page = await laptop.newPage();
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
    await mail?.close();
  });

  /** A screenshot, and the accessibility check (axe, light and dark) at the same point. */
  const shot = async (p: Page, name: string) => {
    await p.screenshot({ path: `${SHOTS}${name}.png` });
    await expectAccessibleBothSchemes(p, name);
  };

  /** The laptop: e-mail, password, then the link is what is left to prove; sends it. */
  async function laptopAsks(): Promise<string> {
    await page.goto(`${base}/signin`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    const send = page.getByRole('button', { name: 'E-mail me a sign-in link' });
    await send.waitFor();
    const before = mail.messages.length;
    await send.click();
    await page.getByText(/We sent a sign-in link to r•••@example\.com/).waitFor();
    return signinLink((await mail.next(email, before)).raw).url;
  }

  it('turns links on in the security settings, then signs in with password + link approved on a phone', async () => {
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/enroll')}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    await page.getByRole('button', { name: 'Turn on' }).click();
    await page.getByText('E-mail sign-in links are on.').waitFor();
    await page.locator('#st-otp', { hasText: /^on$/ }).waitFor();
    await page.locator('#h-otp').scrollIntoViewIfNeeded();
    await shot(page, 'enroll-otp');
    await page.request.post(`${base}/auth/signout`, { headers: { 'X-Requested-With': 'test' } });

    const url = await laptopAsks();
    await shot(page, 'signin-otp-wait');
    expect(url.startsWith(`${base}/signin/otp#`)).toBe(true);

    const p = await phone.newPage();
    await p.goto(url);
    await p.getByText('Someone asked to sign in as').waitFor();
    expect(await p.locator('#otp-email').textContent()).toBe(email);
    expect(await p.locator('#otp-browser').textContent()).toMatch(/Chrome \d+ on Linux/);
    expect(await p.locator('#otp-address').textContent()).toBe('127.0.0.1');
    // The token left the address bar.
    expect(p.url()).toBe(`${base}/signin/otp`);
    await shot(p, 'otp-link');
    await p.getByRole('button', { name: 'Yes, sign in that browser' }).click();
    await p.getByText('Approved.').waitFor();
    await shot(p, 'otp-approved');
    // The phone is not signed in.
    const phoneAuth = await p.request.post(`${base}/auth`, { headers: { 'X-Requested-With': 'test' } });
    expect((await phoneAuth.json()).UserID).toBe('');

    // The laptop continues by itself, at two factors.
    await page.locator('#step-done').getByText('Signed in as').waitFor({ timeout: 10_000 });
    const auth = await page.request.post(`${base}/auth`, { headers: { 'X-Requested-With': 'test' } });
    expect(await auth.json()).toMatchObject({ IntegrityLevel: 3, Proven: ['password', 'otp'] });
    await p.close();
  }, 90_000);

  it('"This was not me" on the phone stops the laptop\'s sign-in', async () => {
    await page.request.post(`${base}/auth/signout`, { headers: { 'X-Requested-With': 'test' } });
    const url = await laptopAsks();
    const p = await phone.newPage();
    await p.goto(url);
    await p.getByRole('button', { name: 'This was not me' }).click();
    await p.getByText('Refused.').waitFor();
    await shot(p, 'otp-refused');
    await page.getByText('This sign-in was refused from the e-mail link.').waitFor({ timeout: 10_000 });
    await page.getByLabel('E-mail address').waitFor();
    // The link is spent: opening it again says so.
    const again = await phone.newPage();
    await again.goto(url);
    await again.getByText('This link is not valid any more').waitFor();
    await p.close();
    await again.close();
  }, 90_000);
});
