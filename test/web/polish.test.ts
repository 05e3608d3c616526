/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROXY_PATHS } from '../../src/wire/proxy.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { type Account, account, PW, setTenant, totpCode, wrongTotp } from '../kit/index.js';
import { axeViolations, expectAccessible, expectAccessibleBothSchemes } from './axe.js';

/**
 * The sign-in pages as a new user meets them (issue 18, item 7), in headless Chromium: the top
 * bar and heading follow the state, the proxy's App is named, a wrong secret is cleared, set-up
 * factors say "Replace"/"Change", no jargon, the API explorer's step-up link comes back to the
 * same request, "Not you?" stays on one line, dark mode, and axe-core on every page.
 * Over 400 lines: the behaviours share one service, one browser and the App behind a fake proxy
 * callback, which are slow to start; each test is independent of the others' order.
 */
const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
// Screenshots go to docs/screenshots/ only when asked (UPDATE_SCREENSHOTS=1), as in browser.test.ts.
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
/** Words that are the service's, not the person's: never on a page. */
const JARGON = /\blevel \d\b|integrity|Verified:|nothing yet|RFC ?\d|\bfactor\b|\bintent\b/i;

describe(`sign-in pages as a new user meets them, in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;
  let app: Server;
  let appOrigin: string;

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    base = await s.app.listen({ port: 0, host: '127.0.0.1' });
    // The application behind the proxy: where the proxy's callback lands.
    app = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><title>app</title><h1 id="landed">${req.url?.split('?')[0]}</h1>`);
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await new Promise((r) => app?.close(r));
    await s?.close();
  });

  /** A page in a context of its own (its own cookies); browser.close() in afterAll ends them all. */
  async function newPage(viewport = { width: 960, height: 720 }): Promise<Page> {
    return (await browser.newContext({ viewport })).newPage();
  }

  /** A screenshot in the light and in the dark scheme (name.png, name-dark.png). */
  async function shots(page: Page, name: string, fullPage = false) {
    await page.emulateMedia({ colorScheme: 'light' });
    await page.screenshot({ path: `${SHOTS}ui-${name}.png`, fullPage });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: `${SHOTS}ui-${name}-dark.png`, fullPage });
    await page.emulateMedia({ colorScheme: 'light' });
  }

  /** The top bar's visible links, in order. */
  const navLinks = async (page: Page) =>
    (await page.locator('header nav a:visible').allTextContents()).map((t) => t.trim());

  /** All the page's own words, shown or not (the API explorer's response output is the API's, left out). */
  const expectNoJargon = async (page: Page, where: string) =>
    expect(
      await page.evaluate(() => {
        const copy = document.body.cloneNode(true) as HTMLElement;
        for (const pre of copy.querySelectorAll('pre.out')) pre.remove();
        return copy.textContent ?? '';
      }),
      where,
    ).not.toMatch(JARGON);

  async function signInWithPassword(page: Page, a: Account, returnTo?: string) {
    await page.goto(`${base}/signin${returnTo ? `?return=${encodeURIComponent(returnTo)}` : ''}`);
    await page.getByLabel('E-mail address').fill(a.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
  }

  it('axe fails on a page with a serious violation (the check can fail)', async () => {
    const page = await newPage();
    await page.setContent(
      '<!doctype html><html lang="en"><title>t</title><main><img src="x.png"></main></html>',
    );
    const found = await axeViolations(page);
    expect(found.map((f) => f.id)).toContain('image-alt');
  });

  it('top bar, heading, no jargon: signed out → signed in → signed out, with axe on each page in both schemes', async () => {
    const a = await account(s, { tag: 'nav' });
    const page = await newPage();
    await page.goto(`${base}/signin`);
    await page.getByLabel('E-mail address').waitFor();
    expect(await navLinks(page)).toEqual(['Sign in', 'API explorer']);
    expect(await page.locator('h1').textContent()).toBe('Sign in');
    await expectAccessibleBothSchemes(page, '/signin e-mail step');
    await shots(page, 'signin-email');

    await page.getByLabel('E-mail address').fill(a.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').waitFor();
    // Named but nothing proven: not signed in yet.
    expect(await navLinks(page)).toEqual(['Sign in', 'API explorer']);
    await expectNoJargon(page, 'password step');
    await expectAccessibleBothSchemes(page, '/signin password step');
    await page.getByLabel('Password').fill(PW);
    await shots(page, 'signin-password');
    await page.getByRole('button', { name: 'Sign in with password' }).click();

    await page.getByRole('heading', { name: 'You are signed in' }).waitFor();
    expect(await page.locator('#done-who').textContent()).toBe(a.email);
    expect(await page.locator('h1').textContent()).toBe('You are signed in');
    expect(await page.title()).toMatch(/^You are signed in · /);
    expect(await page.locator('#lead').isVisible()).toBe(false);
    expect(await page.locator('#done-how').textContent()).toBe('You proved who you are with your password.');
    expect(await navLinks(page)).toEqual([
      'Security settings',
      'Access requests',
      'API explorer',
      'Sign out',
    ]);
    await expectNoJargon(page, 'signed in');
    await expectAccessibleBothSchemes(page, '/signin signed in');
    await shots(page, 'signin-done');

    // Every other page, freshly loaded while signed in: the server draws the same top bar.
    for (const path of ['/signin', '/signin/enroll', '/signin/debug', '/signin/signout']) {
      await page.goto(`${base}${path}`);
      await page.waitForLoadState('networkidle');
      expect(await navLinks(page), path).toEqual([
        'Security settings',
        'Access requests',
        'API explorer',
        'Sign out',
      ]);
      await expectNoJargon(page, path);
      await expectAccessibleBothSchemes(page, `${path} signed in`);
    }
    // The explorer does not ask someone signed in to sign in first.
    await page.goto(`${base}/signin/debug`);
    expect(await page.locator('p.lead').innerText()).not.toContain('Sign in');

    await page.goto(`${base}/signin/signout`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You are signed out.').waitFor();
    expect(await navLinks(page)).toEqual(['Sign in', 'API explorer']);
    await expectAccessibleBothSchemes(page, '/signin/signout after signing out');
    await shots(page, 'signout');

    // Signed out, freshly loaded: "Sign in", and the explorer says to sign in first.
    for (const path of ['/signin/signout', '/signin/debug']) {
      await page.goto(`${base}${path}`);
      expect(await navLinks(page), path).toEqual(['Sign in', 'API explorer']);
      await expectAccessibleBothSchemes(page, `${path} signed out`);
    }
    expect(await page.locator('p.lead').innerText()).toContain('Sign in first');
    await page.goto(`${base}/signin/signout`);
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(0);
    expect(await page.getByText('You are not signed in.').isVisible()).toBe(true);
  }, 120_000);

  it('a wrong password (and a wrong code) is cleared from the field and the field focused', async () => {
    const a = await account(s, { tag: 'wrong', totp: true });
    const page = await newPage();
    await page.goto(`${base}/signin`);
    await page.getByLabel('E-mail address').fill(a.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill('not the password at all');
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.getByText('That is not correct. Please try again.').waitFor();
    expect(await page.getByLabel('Password').inputValue()).toBe('');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('password');
    await expectAccessibleBothSchemes(page, '/signin wrong password');
    await shots(page, 'signin-wrong-password');
    // The e-mail address is kept for correcting; here the right password goes on to the code.
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    const code = page.getByLabel('Code from your authenticator app');
    await code.waitFor();
    expect(await page.locator('h1').textContent()).toBe('Sign in');
    // Part-way: plain words about what is proven and what is left.
    expect(await page.locator('#progress').textContent()).toBe(
      'You proved your password. One more step is needed to sign in.',
    );
    await expectNoJargon(page, 'second step');
    await code.fill(wrongTotp(a.totp as string));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.getByText('That is not correct. Please try again.').waitFor();
    expect(await code.inputValue()).toBe('');
    await expectAccessibleBothSchemes(page, '/signin second step');
  }, 60_000);

  it('coming from the proxy, the page names the App and the sign-in ends at its callback', async () => {
    const created = await s.req({
      method: 'POST',
      url: '/apps',
      payload: { Name: 'Payroll <Europe>', URL: appOrigin },
    });
    expect(created.statusCode, created.body).toBe(201);
    const appId = String(created.headers['x-id']);
    expect((await s.req({ method: 'POST', url: `/apps/${appId}/proxytoken` })).statusCode).toBe(201);
    // An App without a proxy: the back channel refuses it, so the page does not name it either.
    const idle = await s.req({ method: 'POST', url: '/apps', payload: { Name: 'Idle app', URL: appOrigin } });
    const idleId = String(idle.headers['x-id']);
    const a = await account(s, { tag: 'proxy' });
    const page = await newPage();
    const state = 'a'.repeat(32);
    const callback = `${appOrigin}${PROXY_PATHS.callback}`;
    // What the proxy does: send the browser to the back channel's sign-in step.
    await page.goto(
      `${base}/proxy/v1/signin?app=${appId}&state=${state}&return=${encodeURIComponent(callback)}`,
    );
    await page.getByLabel('E-mail address').waitFor();
    expect(new URL(page.url()).pathname).toBe('/signin');
    expect(await page.locator('#lead').innerText()).toBe('to continue to Payroll <Europe>');
    expect(await page.locator('#lead').innerText()).not.toContain('127.0.0.1');
    await expectAccessibleBothSchemes(page, '/signin from the proxy');
    await shots(page, 'signin-from-proxy');
    await page.getByLabel('E-mail address').fill(a.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL((u) => u.pathname === PROXY_PATHS.callback);
    const landed = new URL(page.url());
    expect(landed.origin).toBe(appOrigin);
    expect(landed.searchParams.get('state')).toBe(state);
    expect(landed.searchParams.get('code')).toBeTruthy();

    // The name comes only from an App with a proxy named by the back channel's own path.
    const lead = async (ret: string) => {
      const p = await newPage();
      await p.goto(`${base}/signin?return=${encodeURIComponent(ret)}`);
      const text = await p.locator('#lead').innerText();
      await p.context().close();
      return text;
    };
    const q = `state=${state}&return=${encodeURIComponent(callback)}`;
    expect(await lead(`/proxy/v1/signin?app=${idleId}&${q}`)).toBe('to continue to Gatehouse');
    expect(await lead(`/proxy/v1/signin?app=nosuchapp&${q}`)).toBe('to continue to Gatehouse');
    expect(await lead(`/proxy/v1/signin?app=${appId.toUpperCase()}&${q}`)).toBe('to continue to Gatehouse');
    expect(await lead(`/signin/enroll?app=${appId}`)).toBe('to continue to Gatehouse');
    expect(await lead(`${base}/proxy/v1/signin?app=${appId}&${q}`)).toBe('to continue to Payroll <Europe>');
  }, 60_000);

  it('security settings: set-up factors say Change and Replace; replacing the app keeps the old one until confirmed', async () => {
    const a = await account(s, { tag: 'replace', pin: true, totp: true });
    const page = await newPage();
    await signInWithPassword(page, a, '/signin/enroll');
    const code = page.getByLabel('Code from your authenticator app');
    await code.fill(totpCode(a.totp as string));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    const start = page.locator('#totp-start');
    await expect.poll(() => start.textContent()).toBe('Replace the authenticator app');
    expect(await page.locator('#e-password button').textContent()).toBe('Change password');
    expect(await page.locator('#e-pin button').textContent()).toBe('Change PIN');
    expect(await page.locator('#totp-replace-note').isVisible()).toBe(false);
    await expectNoJargon(page, '/signin/enroll');
    // Cancel leaves the set-up and brings the card's buttons back; then start again for real.
    await start.click();
    await page.locator('#totp-qr').waitFor();
    expect(await start.isVisible()).toBe(false);
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.locator('#totp-setup').isVisible()).toBe(false);
    expect(await start.isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Remove' }).isVisible()).toBe(true);
    await start.click();
    await page.locator('#totp-qr').waitFor();
    expect(await page.locator('#totp-replace-note').isVisible()).toBe(true);
    await expectAccessibleBothSchemes(page, '/signin/enroll replacing the app');
    await shots(page, 'enroll', true);
    const secret = ((await page.locator('#totp-secret').textContent()) ?? '').trim();
    expect(secret).not.toBe(a.totp);
    // Not confirmed yet: the old app still proves, the new one does not.
    const probe = await browser.newContext();
    const h = { 'x-requested-with': 'test' };
    await probe.request.post(`${base}/auth/email`, { form: { email: a.email }, headers: h });
    expect(
      (
        await probe.request.post(`${base}/auth/totp`, { form: { code: totpCode(secret) }, headers: h })
      ).status(),
    ).toBe(403);
    await probe.close();
    // The sign-in spent this time step: the next step's code (a code is accepted once).
    await page.getByLabel('Code shown by the app').fill(totpCode(secret, 1));
    await page.getByRole('button', { name: 'Confirm' }).click();
    await page.getByText('Authenticator app set up.').waitFor();
    expect(await page.locator('#totp-replace-note').isVisible()).toBe(false);
    await expect.poll(() => start.textContent()).toBe('Replace the authenticator app');

    // Remove asks first: declined, nothing changes; accepted, the card offers to set one up.
    const remove = page.getByRole('button', { name: 'Remove' });
    const deletes: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'DELETE') deletes.push(r.url());
    });
    const asked = new Promise<void>((resolve) =>
      page.once('dialog', (d) => {
        void d.dismiss();
        resolve();
      }),
    );
    await remove.click();
    await asked;
    await page.waitForLoadState('networkidle');
    expect(deletes).toEqual([]);
    expect(await page.locator('#st-totp').textContent()).toBe('set up');
    page.once('dialog', (d) => {
      expect(d.message()).toContain('Remove the authenticator app?');
      void d.accept();
    });
    await remove.click();
    await page.getByText('Authenticator app removed.').waitFor();
    expect(deletes).toEqual([`${base}/auth/enroll/totp`]);
    await expect.poll(() => start.textContent()).toBe('Set up an authenticator app');
    expect(await remove.isVisible()).toBe(false);
    expect(await page.locator('#st-totp').textContent()).toBe('not set up');
  }, 60_000);

  it('the API explorer: a 401 Insufficient Integrity offers a step-up that comes back and sends the same request', async () => {
    const a = await account(s, { tag: 'debug', admin: true, totp: true });
    const page = await newPage();
    // Signed in with the password only (level 2): enough to read, not for an administrator's request.
    const h = { 'x-requested-with': 'test' };
    expect(
      (await page.request.post(`${base}/auth/email`, { form: { email: a.email }, headers: h })).status(),
    ).toBe(204);
    expect(
      (await page.request.post(`${base}/auth/password`, { form: { password: PW }, headers: h })).status(),
    ).toBe(204);
    await page.goto(`${base}/signin/debug`);
    expect(await navLinks(page)).toEqual([
      'Security settings',
      'Access requests',
      'API explorer',
      'Sign out',
    ]);
    expect(await page.locator('p.lead').innerText()).not.toContain('Sign in first');
    await page.getByLabel('Path').fill(`/users?filter=${encodeURIComponent(`Email = "${a.email}"`)}`);
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('#r-status').getByText(/^401 /).waitFor();
    const link = page.getByRole('link', { name: 'Confirm it’s you and send it again' });
    await link.waitFor();
    await page.waitForLoadState('networkidle');
    // Still signed in: a 401 for a stronger proof does not flip the top bar.
    expect(await navLinks(page)).toEqual([
      'Security settings',
      'Access requests',
      'API explorer',
      'Sign out',
    ]);
    expect(await page.locator('#d-stepup').innerText()).not.toMatch(/sign in first/i);
    await expectNoJargon(page, '/signin/debug after 401');
    await expectAccessibleBothSchemes(page, '/signin/debug step-up offered');
    await shots(page, 'debug-stepup', true);
    await link.click();
    await page.waitForURL((u) => u.pathname === '/signin');
    // The page's script sets the heading once it has asked who is signed in (the HTML says "Sign in").
    await page.getByRole('heading', { name: 'Confirm it’s you', level: 1 }).waitFor();
    expect(await navLinks(page)).toEqual([
      'Security settings',
      'Access requests',
      'API explorer',
      'Sign out',
    ]);
    const code = page.getByLabel('Code from your authenticator app');
    await code.waitFor();
    expect(await page.locator('#progress').textContent()).toBe(
      'You proved your password. One more step is needed for what you asked to do.',
    );
    await expectAccessibleBothSchemes(page, '/signin step-up');
    await shots(page, 'signin-stepup');
    await code.fill(totpCode(a.totp as string));
    await page.getByRole('button', { name: 'Verify code' }).click();
    // Back at the explorer, the same request sent again, now answered.
    await page.waitForURL(`${base}/signin/debug`);
    await page.locator('#r-status').getByText(/^200 /).waitFor();
    expect(await page.getByLabel('Path').inputValue()).toContain('/users?filter=');
    expect(await page.locator('#r-body').textContent()).toContain(a.email);
    expect(await page.locator('#d-stepup').isVisible()).toBe(false);
    await expectAccessibleBothSchemes(page, '/signin/debug answered');
    await shots(page, 'debug', true);
    // The saved request was read once: coming back again sends nothing.
    await page.goto(`${base}/signin/debug?resume=1`);
    await page.waitForLoadState('networkidle');
    expect(await page.locator('#d-result').isVisible()).toBe(false);
  }, 90_000);

  it('security settings say before any typing that a change needs confirming first, and the link confirms', async () => {
    const a = await account(s, { tag: 'before', totp: true });
    const page = await newPage();
    const h = { 'x-requested-with': 'test' };
    await page.request.post(`${base}/auth/email`, { form: { email: a.email }, headers: h });
    await page.request.post(`${base}/auth/password`, { form: { password: PW }, headers: h });
    await page.goto(`${base}/signin/enroll`);
    const notice = page.locator('#enroll-stepup');
    await notice.waitFor();
    await expectAccessibleBothSchemes(page, '/signin/enroll confirm first');
    await shots(page, 'enroll-confirm-first');
    await notice.getByRole('link', { name: 'Confirm it’s you' }).click();
    const code = page.getByLabel('Code from your authenticator app');
    await code.waitFor();
    // Already signed in on arrival: a confirmation, not a new sign-in.
    expect(await page.locator('h1').textContent()).toBe('Confirm it’s you');
    expect(await page.locator('#who-label').textContent()).toBe('Signed in as');
    await code.fill(totpCode(a.totp as string));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    await page.locator('#st-totp', { hasText: /^set up$/ }).waitFor();
    await page.waitForLoadState('networkidle');
    expect(await notice.isVisible()).toBe(false);
    // And the change goes through without a detour.
    await page.getByLabel('New PIN (4 to 12 digits)').fill('86428642');
    await page.getByRole('button', { name: 'Save PIN' }).click();
    await page.getByText('PIN saved.').waitFor();
    expect(new URL(page.url()).pathname).toBe('/signin/enroll');
  }, 60_000);

  it('the API explorer resumes only a request saved by this tab in the last ten minutes', async () => {
    const a = await account(s, { tag: 'resume' });
    const page = await newPage();
    const h = { 'x-requested-with': 'test' };
    await page.request.post(`${base}/auth/email`, { form: { email: a.email }, headers: h });
    await page.request.post(`${base}/auth/password`, { form: { password: PW }, headers: h });
    const sent: string[] = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/users')) sent.push(`${r.method()} ${r.url()}`);
    });
    await page.goto(`${base}/signin/debug`);
    const save = (at: number, path: string) =>
      page.evaluate(
        ([t, p]) =>
          sessionStorage.setItem(
            'gatehouse.debug.resume',
            JSON.stringify({ at: t, request: { method: 'DELETE', path: p, headers: '', body: '' } }),
          ),
        [at, path] as const,
      );
    // Stale (11 minutes) or from the future: not sent, and dropped.
    for (const at of [Date.now() - 11 * 60_000, Date.now() + 60 * 60_000]) {
      await save(at, '/users/stale');
      await page.goto(`${base}/signin/debug?resume=1`);
      await page.waitForLoadState('networkidle');
      expect(await page.locator('#d-result').isVisible()).toBe(false);
      expect(await page.evaluate(() => sessionStorage.getItem('gatehouse.debug.resume'))).toBeNull();
    }
    // Without ?resume=1 nothing is read; the query string cannot carry a request of its own.
    await save(Date.now(), '/users/fresh');
    await page.goto(`${base}/signin/debug?method=DELETE&path=/users/${a.id}`);
    await page.waitForLoadState('networkidle');
    expect(await page.locator('#d-result').isVisible()).toBe(false);
    expect(sent).toEqual([]);
    // Another tab of the same browser does not see this tab's saved request.
    const other = await page.context().newPage();
    await other.goto(`${base}/signin/debug?resume=1`);
    await other.waitForLoadState('networkidle');
    expect(await other.locator('#d-result').isVisible()).toBe(false);
    // Fresh, in this tab, with ?resume=1: sent once, and ?resume=1 leaves the address bar.
    await page.goto(`${base}/signin/debug?resume=1`);
    await page
      .locator('#r-status')
      .getByText(/^40\d /)
      .waitFor();
    expect(sent).toEqual([`DELETE ${base}/users/fresh`]);
    expect(page.url()).toBe(`${base}/signin/debug`);
  }, 60_000);

  it('signed out, the explorer offers to sign in and come back to the request', async () => {
    const a = await account(s, { tag: 'anon' });
    const page = await newPage();
    await page.goto(`${base}/signin/debug`);
    expect(await page.locator('p.lead').innerText()).toContain('Sign in first');
    await page.getByLabel('Path').fill('/users/me');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('#r-status').getByText(/^401 /).waitFor();
    await page.getByRole('link', { name: 'Sign in and send it again' }).waitFor();
    expect(await navLinks(page)).toEqual(['Sign in', 'API explorer']);
    await page.getByRole('link', { name: 'Sign in and send it again' }).click();
    await page.getByLabel('E-mail address').fill(a.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL(`${base}/signin/debug`);
    await page.locator('#r-status').getByText(/^200 /).waitFor();
    expect(await page.locator('#r-body').textContent()).toContain(a.email);
  }, 60_000);

  it('the explorer notices a session that ended meanwhile: the top bar goes back to Sign in', async () => {
    const a = await account(s, { tag: 'ended' });
    const page = await newPage();
    const h = { 'x-requested-with': 'test' };
    await page.request.post(`${base}/auth/email`, { form: { email: a.email }, headers: h });
    await page.request.post(`${base}/auth/password`, { form: { password: PW }, headers: h });
    await page.goto(`${base}/signin/debug`);
    expect(await navLinks(page)).toEqual([
      'Security settings',
      'Access requests',
      'API explorer',
      'Sign out',
    ]);
    // Signed out elsewhere (another tab, an administrator): the next request is refused.
    expect((await page.request.post(`${base}/auth/signout`, { headers: h })).status()).toBe(204);
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByRole('link', { name: 'Sign in and send it again' }).waitFor();
    await expect.poll(() => navLinks(page)).toEqual(['Sign in', 'API explorer']);
    expect(await page.locator('p.lead').innerText()).toContain('Sign in first');
  }, 60_000);

  it('"Not you?" stays on one line, also on a phone with a long address', async () => {
    const long = await account(s, { tag: 'a-rather-long-local-part-for-a-small-screen' });
    for (const width of [320, 375, 960]) {
      const page = await newPage({ width, height: 700 });
      await page.goto(`${base}/signin`);
      await page.getByLabel('E-mail address').fill(long.email);
      await page.getByRole('button', { name: 'Continue' }).click();
      const button = page.getByRole('button', { name: 'Not you?' });
      await button.waitFor();
      // One line: the text's line boxes all share one top.
      const lines = await button.evaluate((b) => {
        const r = document.createRange();
        r.selectNodeContents(b);
        return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size;
      });
      expect(lines, `width ${width}`).toBe(1);
      const box = await button.boundingBox();
      expect(box && box.x + box.width <= width, `width ${width}: inside the screen`).toBe(true);
      if (width === 320) {
        await expectAccessibleBothSchemes(page, '/signin on a phone');
        await shots(page, 'signin-phone');
      }
      await page.context().close();
    }
  }, 60_000);

  it('dark mode follows the system setting', async () => {
    const page = await newPage();
    await page.goto(`${base}/signin`);
    const colours = () =>
      page.evaluate(() => {
        const lum = (c: string) => {
          const [r, g, b] = (c.match(/\d+/g) ?? []).map(Number);
          return (0.2126 * (r ?? 0) + 0.7152 * (g ?? 0) + 0.0722 * (b ?? 0)) / 255;
        };
        const card = document.querySelector('.card') as Element;
        return {
          body: lum(getComputedStyle(document.body).backgroundColor),
          card: lum(getComputedStyle(card).backgroundColor),
          ink: lum(getComputedStyle(document.body).color),
          input: lum(getComputedStyle(document.getElementById('email') as Element).backgroundColor),
        };
      });
    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await colours();
    expect(dark.body).toBeLessThan(0.2);
    expect(dark.card).toBeLessThan(0.2);
    expect(dark.input).toBeLessThan(0.2);
    expect(dark.ink).toBeGreaterThan(0.8);
    await page.emulateMedia({ colorScheme: 'light' });
    const light = await colours();
    expect(light.body).toBeGreaterThan(0.8);
    expect(light.input).toBeGreaterThan(0.8);
    expect(light.ink).toBeLessThan(0.2);
    await expectAccessible(page, '/signin light');
  });

  it('tenant read level 3: someone at level 2 is not shown as signed in', async () => {
    await setTenant(s, { IntegrityRead: 3 });
    try {
      const a = await account(s, { tag: 'read3', totp: true });
      const page = await newPage();
      const h = { 'x-requested-with': 'test' };
      await page.request.post(`${base}/auth/email`, { form: { email: a.email }, headers: h });
      await page.request.post(`${base}/auth/password`, { form: { password: PW }, headers: h });
      for (const path of ['/signin/debug', '/signin/signout']) {
        await page.goto(`${base}${path}`);
        await page.waitForLoadState('networkidle');
        expect(await navLinks(page), path).toEqual(['Sign in', 'API explorer']);
      }
      await page.goto(`${base}/signin`);
      await page.getByLabel('Code from your authenticator app').waitFor();
      expect(await page.locator('h1').textContent()).toBe('Sign in');
      expect(await navLinks(page)).toEqual(['Sign in', 'API explorer']);
    } finally {
      await setTenant(s, { IntegrityRead: 2 });
    }
  }, 60_000);
});
