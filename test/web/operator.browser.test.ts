import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSetupLink } from '../../src/auth/setuplinks.js';
import { create } from '../groups/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { type Account, account, PW, totpCode } from '../kit/index.js';
import { expectAccessibleBothSchemes } from './axe.js';

/**
 * The pages of the operator's first hour (issue 28) in headless Chromium, with axe-core in the
 * light and dark schemes and screenshots: the one-time sign-in URL's page, the service's error
 * pages for browsers (404 under / and /signin/), and the approvals page asking an administrator
 * for the step-up instead of showing "no requests" while requests wait.
 */
const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;

describe(`operator pages in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    base = await s.app.listen({ port: 0, host: '127.0.0.1' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  async function shots(page: Page, name: string) {
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme });
      await page.screenshot({
        path: `${SHOTS}ui-${name}${colorScheme === 'dark' ? '-dark' : ''}.png`,
        fullPage: true,
      });
    }
    await page.emulateMedia({ colorScheme: 'light' });
  }

  /** A browser context signed in with the password only (the API steps the sign-in page takes). */
  async function passwordOnly(a: Account): Promise<BrowserContext> {
    const context = await browser.newContext();
    const headers = { 'x-requested-with': 'gatehouse' };
    expect(
      (await context.request.post(`${base}/auth/email`, { form: { email: a.email }, headers })).status(),
    ).toBe(204);
    expect(
      (await context.request.post(`${base}/auth/password`, { form: { password: PW }, headers })).status(),
    ).toBe(204);
    return context;
  }

  it('the one-time sign-in URL: choose a password, be signed in; the URL then says it is used', async () => {
    const a = await account(s, { tag: 'setup', admin: true, password: false });
    const token = await createSetupLink({ db: s.db }, a.id, 3600);
    const page = await (await browser.newContext()).newPage();
    const url = `${base}/signin/setup?code=${token}`;
    await page.goto(url);
    expect(await page.locator('h1').textContent()).toBe('Choose your password');
    expect(await page.locator('p.lead strong').textContent()).toBe(a.email);
    await expectAccessibleBothSchemes(page, '/signin/setup');
    await shots(page, 'setup');
    // Two different passwords: the page says so and the link still works.
    await page.getByLabel('New password', { exact: true }).fill('one long pass phrase');
    await page.getByLabel('Repeat the new password').fill('another long pass phrase');
    await page.getByRole('button', { name: 'Save password and sign in' }).click();
    await page.locator('#setup-error').waitFor();
    expect(await page.locator('#setup-error').textContent()).toContain('not the same');
    await expectAccessibleBothSchemes(page, '/signin/setup with an error');
    await page.getByLabel('New password', { exact: true }).fill('one long pass phrase');
    await page.getByLabel('Repeat the new password').fill('one long pass phrase');
    await page.getByRole('button', { name: 'Save password and sign in' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    const me = await page.request.get(`${base}/users/me`);
    expect(me.status()).toBe(200);
    expect(((await me.json()) as { Email: string }).Email).toBe(a.email);
    // The header shows the signed-in links, the approvals page among them.
    await expect
      .poll(async () => (await page.locator('header nav a:visible').allTextContents()).map((t) => t.trim()))
      .toContain('Access requests');
    const again = await page.goto(url);
    expect(again?.status()).toBe(410);
    expect(await page.locator('h1').textContent()).toBe('Link no longer valid');
    await expectAccessibleBothSchemes(page, 'used one-time URL');
  }, 60_000);

  it('browsers get 404s as pages in the sign-in design, under / and /signin/; API clients get JSON', async () => {
    const page = await (await browser.newContext()).newPage();
    for (const path of ['/no/such/page', '/signin/no-such-page', '/users/nobody-here']) {
      const r = await page.goto(`${base}${path}`);
      expect(r?.status(), path).toBe(path.startsWith('/users/') ? 401 : 404);
      expect(r?.headers()['content-type'], path).toMatch(/^text\/html/);
      expect(r?.headers()['x-error-code'], path).toBe(
        path.startsWith('/users/') ? 'Unauthenticated' : 'Not Found',
      );
      expect(r?.headers()['content-security-policy'], path).toContain("script-src 'self'");
      expect(await page.locator('link[rel="stylesheet"]').getAttribute('href')).toMatch(
        /^\/signin\/assets\/style-[A-Z0-9]{8}\.css$/,
      );
      await expectAccessibleBothSchemes(page, path);
    }
    await page.goto(`${base}/signin/no-such-page`);
    expect(await page.locator('h1').textContent()).toBe('Page not found');
    await shots(page, 'error-404');
    const api = await fetch(`${base}/signin/no-such-page`, { headers: { accept: 'application/json' } });
    expect(api.status).toBe(404);
    expect(((await api.json()) as { Code: string }).Code).toBe('Not Found');
    const curl = await fetch(`${base}/no/such/page`, { headers: { accept: '*/*' } });
    expect(curl.headers.get('content-type')).toMatch(/^application\/json/);
    // What a path holds is escaped on the page, never markup.
    const evil = await fetch(`${base}/%3Cimg%20src=x%20onerror=alert(1)%3E`, {
      headers: { accept: 'text/html' },
    });
    const html = await evil.text();
    expect(html).not.toContain('<img src=x');
  }, 60_000);

  it('approvals: an administrator signed in with a password only is asked for the step-up, then sees the requests', async () => {
    const admin = await account(s, { tag: 'approver-admin', admin: true, totp: true });
    const user = await account(s, { tag: 'asker' });
    const g = await create(s, 'groups', { Name: 'Payroll', RequiresApproval: true });
    const asker = await (await passwordOnly(user)).newPage();
    await asker.goto(`${base}/signin/groups/${g}`);
    await asker.fill('#reason', 'month-end close');
    await asker.click('#request');
    await asker.waitForSelector('#state[data-state="requested"]');
    await expectAccessibleBothSchemes(asker, 'access request page, requested');
    await shots(asker, 'access-requested');

    const page = await (await passwordOnly(admin)).newPage();
    await page.goto(`${base}/signin/approvals`);
    // Not "no requests": a request waits, and the page asks for the stronger sign-in.
    expect(await page.locator('#empty').count()).toBe(0);
    expect(await page.locator('#stepup').isVisible()).toBe(true);
    await expectAccessibleBothSchemes(page, 'approvals page asking for the step-up');
    await shots(page, 'approvals-stepup');
    await page.getByRole('link', { name: 'Confirm it’s you' }).click();
    await page.waitForURL(/\/signin\?return=%2Fsignin%2Fapprovals&intent=/);
    const code = page.getByLabel('Code from your authenticator app');
    await code.fill(totpCode(admin.totp as string));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.waitForURL(`${base}/signin/approvals`);
    const row = page.locator(`tr[data-user="${user.id}"]`);
    await row.waitFor();
    expect(await page.locator('#stepup').count()).toBe(0);
    expect(await row.locator('td').nth(2).textContent()).toBe('month-end close');
    // The time is the reader's local time, not the raw ISO text.
    const asked = (await row.locator('time').textContent()) ?? '';
    expect(asked).not.toMatch(/T\d\d:\d\d/);
    expect(asked).not.toContain('UTC');
    await expectAccessibleBothSchemes(page, 'approvals page with a request');
    await shots(page, 'approvals');
    await row.locator('button[value="approve"]').click();
    await page.waitForSelector('#done');
    await expectAccessibleBothSchemes(page, 'approvals page after a decision');
  }, 90_000);

  it('does not offer passkeys without a sign-in URL that can carry them; tells the operator in the log', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${base}/signin`);
    expect(await page.locator('#passkey-signin').count()).toBe(0);
    expect(await page.locator('body').getAttribute('data-passkeys')).toBe('no');
    expect(s.logs.some((l) => l.includes('security keys and passkeys are not offered'))).toBe(true);
    const enroll = await (await passwordOnly(await account(s, { tag: 'nokeys' }))).newPage();
    await enroll.goto(`${base}/signin/enroll`);
    expect(await enroll.locator('#h-u2f').count()).toBe(0);
    expect(await enroll.getByText('security keys need the sign-in URL').count()).toBe(0);
  }, 60_000);
});
