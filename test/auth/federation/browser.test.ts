import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../helpers.js';
import { makeUser, PW } from '../../kit/index.js';
import { createProviderApp, setOAuth2 } from './drive.js';
import { type FakeGitHub, startFakeGitHub, startUpstreamOP, type UpstreamOP } from './upstream.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the provider sign-in browser tests are skipped ***\n\n`);
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;

// One backend is enough for the pages (the flow beneath is tested on both in rp.test.ts).
describe.skipIf(!HAVE_CHROMIUM)(
  `provider buttons and sign-in in headless Chromium (${backends()[0]})`,
  () => {
    let s: TestService;
    let op: UpstreamOP;
    let gh: FakeGitHub;
    let browser: Browser;
    let base: string;
    let appOP: string;
    let appGH: string;

    beforeAll(async () => {
      s = await startTestService(backends()[0] ?? 'sqlite');
      await s.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
      appOP = await createProviderApp(
        s,
        'Acme Corporate SSO',
        { ClientID: 'gatehouse' },
        'browser-secret-0123456789',
      );
      appGH = await createProviderApp(s, 'GitHub', { ClientID: 'x' });
      op = await startUpstreamOP([
        {
          client_id: 'gatehouse',
          client_secret: 'browser-secret-0123456789',
          redirect_uris: [`${base}/auth/oauth2rp/${appOP}/callback`],
        },
      ]);
      gh = await startFakeGitHub();
      await setOAuth2(s, appOP, { Issuer: op.issuer });
      const cur = await s.req({ url: `/apps/${appGH}` });
      const r = await s.req({
        method: 'PUT',
        url: `/apps/${appGH}`,
        headers: { 'if-match': String(cur.headers.etag) },
        payload: {
          Name: 'GitHub',
          OAuth2ClientSecret: gh.clientSecret,
          OAuth2: {
            ClientID: gh.clientId,
            AuthorizeURL: `${gh.origin}/login/oauth/authorize`,
            TokenURL: `${gh.origin}/login/oauth/access_token`,
            UserInfoURL: `${gh.origin}/user`,
            Claims: { Subject: 'id' },
            CreateUsers: true,
          },
        },
      });
      expect(r.statusCode, r.body).toBe(204);
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      });
      mkdirSync(SHOTS, { recursive: true });
    }, 60_000);
    afterAll(async () => {
      await browser?.close();
      await op?.close();
      await gh?.close();
      await s?.close();
    });

    async function newPage(): Promise<Page> {
      const context = await browser.newContext({ viewport: { width: 960, height: 760 } });
      return context.newPage();
    }

    it('links a provider from the security settings, then signs in with its button alone', async () => {
      const email = 'robin@example.com';
      await makeUser(s, { email, password: PW });
      op.accounts.set('robin.corp', { sub: 'robin.corp', email, email_verified: true, name: 'Robin' });
      const page = await newPage();
      // Sign in with the password, then link the provider from the security settings page.
      await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/enroll')}`);
      await page.getByRole('button', { name: 'Continue with Acme Corporate SSO' }).waitFor();
      await page.screenshot({ path: `${SHOTS}signin-providers.png` });
      await page.getByLabel('E-mail address').fill(email);
      await page.getByRole('button', { name: 'Continue', exact: true }).click();
      await page.getByLabel('Password').fill(PW);
      await page.getByRole('button', { name: 'Sign in with password' }).click();
      await page.waitForURL(`${base}/signin/enroll`);
      await page.getByText('None linked yet.').waitFor();
      await page.getByRole('button', { name: 'Link Acme Corporate SSO' }).click();
      await page.waitForURL(/\/interaction\//);
      await page.locator('#login').fill('robin.corp');
      await page.locator('#upstream-signin').click();
      await page.waitForURL(`${base}/signin/enroll`);
      await page.locator('#provider-links li', { hasText: 'Acme Corporate SSO' }).waitFor();
      await page.screenshot({ path: `${SHOTS}enroll-providers.png`, fullPage: true });
      await page.context().close();

      // A new browser: the provider's button alone signs Robin in.
      const fresh = await newPage();
      await fresh.goto(`${base}/signin`);
      await fresh.getByRole('button', { name: 'Continue with Acme Corporate SSO' }).click();
      await fresh.waitForURL(/\/interaction\//);
      await fresh.locator('#login').fill('robin.corp');
      await fresh.locator('#upstream-signin').click();
      await fresh.locator('#step-done').waitFor();
      expect(await fresh.locator('#done-who').textContent()).toBe(email);
      expect(await fresh.locator('#done-how').textContent()).toContain('your identity provider');
      await fresh.screenshot({ path: `${SHOTS}signin-provider-done.png` });
      const level = await fresh.evaluate(async () => {
        const r = await fetch('/auth', { method: 'POST', headers: { 'X-Requested-With': 'gatehouse' } });
        return ((await r.json()) as { IntegrityLevel: number }).IntegrityLevel;
      });
      expect(level).toBe(2);
      await fresh.context().close();
    }, 60_000);

    it('signs a new user in through the GitHub-style provider, and back to the page asked for', async () => {
      gh.users.set('hubber', { id: 4242, login: 'hubber', name: 'Hub Ber', email: null });
      const page = await newPage();
      await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/debug')}`);
      await page.getByRole('button', { name: 'Continue with GitHub' }).click();
      await page.waitForURL(/login\/oauth\/authorize/);
      await page.locator('#gh-login').fill('hubber');
      await page.locator('#gh-authorize').click();
      await page.waitForURL(`${base}/signin/debug`);
      const me = await page.evaluate(async () => {
        const r = await fetch('/users/me', { headers: { Accept: 'application/json' } });
        return (await r.json()) as { Name: { FullName?: string } };
      });
      expect(me.Name.FullName).toBe('Hub Ber');
      await page.context().close();
    }, 60_000);

    it('shows the refusal when the provider identity is linked to nobody', async () => {
      op.accounts.set('stranger', { sub: 'stranger', email: 'stranger@example.com', email_verified: true });
      const page = await newPage();
      await page.goto(`${base}/signin`);
      await page.getByRole('button', { name: 'Continue with Acme Corporate SSO' }).click();
      await page.waitForURL(/\/interaction\//);
      await page.locator('#login').fill('stranger');
      await page.locator('#upstream-signin').click();
      await page.getByRole('heading', { name: 'Sign-in failed' }).waitFor();
      expect(await page.textContent('body')).toContain('no account is linked');
      await page.context().close();
    }, 60_000);
  },
);
