import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the location-policy browser test is skipped ***\n\n`);
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';

/**
 * The location policy on the sign-in page: when the tenant's LocationLevel needs a location
 * (AuthResponse.LocationRequired), the page asks the browser's geolocation and reports it
 * (POST /auth/location); Chromium's position is set by the test. Refused permission: the page
 * says so and the session stays below the policy's level.
 */
describe.skipIf(!HAVE_CHROMIUM)(`location policy on the sign-in page (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;
  const email = 'lou@example.com';

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    const u = await s.req({ method: 'POST', url: '/users', payload: { Email: email, Active: true } });
    const id = String(u.headers['x-id']);
    const pw = await s.req({
      method: 'PUT',
      url: `/auth/enroll/password?user=${id}`,
      payload: { Password: PW },
    });
    expect(pw.statusCode).toBe(204);
    await setTenant(s, { LocationLevel: 2, LocationRegions: ['Amsterdam office: 52.3676,4.9041,25'] });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  async function signInAt(where: { latitude: number; longitude: number } | undefined) {
    const context = await browser.newContext(
      where ? { geolocation: where, permissions: ['geolocation'] } : { permissions: [] },
    );
    const page = await context.newPage();
    await page.goto(`${base}/signin`);
    // The page asks as soon as the user is named (the read level already needs the location).
    const located = page.waitForResponse((r) => r.url().endsWith('/auth/location'), { timeout: 10_000 });
    located.catch(() => undefined);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    const password = page.waitForResponse((r) => r.url().endsWith('/auth/password'));
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    expect((await password).status()).toBe(204);
    return { context, page, located };
  }

  const level = (page: import('playwright-core').Page) =>
    page.evaluate(() =>
      fetch('/auth', { method: 'POST', headers: { 'X-Requested-With': 'test' } }).then((r) => r.json()),
    );

  it('inside the region: the page reports the position and the sign-in completes', async () => {
    const { context, page } = await signInAt({ latitude: 52.3874, longitude: 4.6462 });
    await page.locator('#step-done', { hasText: 'Signed in as' }).waitFor();
    expect(await level(page)).toMatchObject({ IntegrityLevel: 2, LocationRequired: false });
    await context.close();
  }, 60_000);

  it('outside, or with the permission refused: the page says so and the level stays below the policy', async () => {
    const outside = await signInAt({ latitude: 52.0907, longitude: 5.1214 });
    expect((await outside.located).status()).toBe(204);
    await outside.page.getByText('Full access is possible only from one of the allowed locations.').waitFor();
    expect(await level(outside.page)).toMatchObject({
      IntegrityLevel: 1,
      LocationRequired: true,
      Proven: ['password'],
    });
    await outside.context.close();
    const refused = await signInAt(undefined);
    await refused.page.getByText('Your location is needed').waitFor();
    await refused.page.screenshot({ path: `${SHOTS}signin-location.png` });
    expect(await level(refused.page)).toMatchObject({ IntegrityLevel: 1, LocationRequired: true });
    await refused.context.close();
  }, 60_000);
});
