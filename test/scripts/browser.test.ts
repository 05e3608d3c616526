import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { provisionTotp } from '../kit/index.js';
import { addScript } from './kit.js';

/*
 * What a person sees of a sign-in script: a denial's reason, and the reason a script asks for
 * another factor, on the sign-in page in headless Chromium.
 */
const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM && process.env.CI)
  throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';

describe.skipIf(!HAVE_CHROMIUM)(`sign-in scripts in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;
  let page: Page;

  const user = async (email: string, totp: boolean) => {
    const u = await s.req({ method: 'POST', url: '/users', payload: { Email: email, Active: true } });
    const id = String(u.headers['x-id']);
    const pw = await s.req({
      method: 'PUT',
      url: `/auth/enroll/password?user=${id}`,
      payload: { Password: PW },
    });
    expect(pw.statusCode).toBe(204);
    if (totp) await provisionTotp(s, id);
  };

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    await addScript(
      s,
      'sign-in',
      `function hook(input) {
        if (input.User.Email.startsWith('contractor')) return { Deny: 'Contractor accounts are closed for the holidays. Call the help desk.' };
        if (input.User.Email.startsWith('finance')) return { RequireLevel: 3, Reason: 'Finance staff also confirm with their authenticator app.' };
        return null;
      }`,
    );
    await user('contractor@example.com', false);
    await user('finance@example.com', true);
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
  });

  const passwordStep = async (email: string) => {
    await page.goto(`${base}/signin`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
  };

  it("shows a denial's reason, and the reason a script asks for another factor", async () => {
    await passwordStep('contractor@example.com');
    await page.getByText('Contractor accounts are closed for the holidays. Call the help desk.').waitFor();
    await page.screenshot({ path: `${SHOTS}script-signin-denied.png` });
    expect((await page.request.get(`${base}/users/me`)).status()).toBe(401);

    await page.context().clearCookies();
    await passwordStep('finance@example.com');
    await page.getByText('Finance staff also confirm with their authenticator app.').waitFor();
    await page.getByLabel('Code from your authenticator app').waitFor();
    await page.screenshot({ path: `${SHOTS}script-signin-required-level.png` });
    expect((await page.request.get(`${base}/users/me`)).status()).toBe(401);
  });
});
