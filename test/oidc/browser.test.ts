import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as client from 'openid-client';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers.js';
import { type Account, PW } from '../kit/index.js';
import {
  authorizationUrl,
  type ClientApp,
  makeClient,
  newAccount,
  type OidcService,
  rpConfig,
  startOidcService,
} from './rp.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM && process.env.CI) throw new Error(`${CHROMIUM} is missing and CI=true`);
// As in test/web/browser.test.ts: docs/screenshots/ only with UPDATE_SCREENSHOTS=1.
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;

describe.skipIf(!HAVE_CHROMIUM)(`OpenID provider pages in headless Chromium (${backends()[0]})`, () => {
  let s: OidcService;
  let browser: Browser;
  let page: Page;
  let app: ClientApp;
  let config: client.Configuration;
  let user: Account;

  beforeAll(async () => {
    s = await startOidcService(backends()[0] ?? 'sqlite');
    app = await makeClient(s, { name: 'Team Wiki' });
    config = await rpConfig(s, app);
    user = await newAccount(s, { tag: 'chromium' });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    const context = await browser.newContext({ viewport: { width: 960, height: 720 } });
    page = await context.newPage();
    // The application's side: its redirect URIs answer with a plain page.
    await page.route(/^https:\/\/app\d+\.example\.com\//, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: '<h1>the application</h1>' }),
    );
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  it('signs in on the sign-in page, consents on the consent page, and the app gets its tokens; then signs out', async () => {
    const flow = await authorizationUrl(config, app);
    await page.goto(flow.url.toString());
    // Gatehouse's own sign-in page, returning to the interaction.
    await page.getByLabel('E-mail address').fill(user.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    // The consent page.
    await page.locator('#consent').waitFor();
    expect(await page.locator('#user-email').textContent()).toBe(user.email);
    const scopes = await page.locator('#scopes li').allTextContents();
    expect(scopes).toEqual(
      expect.arrayContaining([
        'Know who you are (your user ID)',
        'See your e-mail address',
        'See which groups you belong to',
      ]),
    );
    await page.screenshot({ path: `${SHOTS}oidc-consent.png` });
    await page.getByRole('button', { name: 'Allow' }).click();
    await page
      .waitForURL((u) => u.toString().startsWith(app.redirect), { timeout: 8000 })
      .catch(async (e) => {
        throw new Error(`${e} at ${page.url()}: ${(await page.content()).slice(0, 500)}`);
      });
    const back = new URL(page.url());
    const tokens = await client.authorizationCodeGrant(config, back, {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    expect(tokens.claims()?.sub).toBe(user.id);

    // RP-initiated logout: the confirmation page, then back to the app.
    await page.goto(
      client
        .buildEndSessionUrl(config, {
          id_token_hint: String(tokens.id_token),
          post_logout_redirect_uri: app.postLogout,
        })
        .toString(),
    );
    await page.locator('#logout').waitFor();
    await page.screenshot({ path: `${SHOTS}oidc-logout.png` });
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL((u) => u.toString().startsWith(app.postLogout));
    expect((await page.request.get(`${s.base}/users/me`)).status()).toBe(401);
  });
});
