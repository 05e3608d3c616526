import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type CDPSession, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { freePort } from '../net.js';
import { expectAccessibleBothSchemes } from './axe.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the security-key browser tests are skipped ***\n\n`);
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;
const PW = 'browser test password';

/**
 * Security keys and passkeys in headless Chromium with its virtual authenticator (the CDP WebAuthn
 * domain): register on the security-settings page, sign in with the key after the e-mail step,
 * sign in with a passkey and no password (button and autofill), refuse a clone (a second
 * authenticator holding the same private key with an older signature counter), refuse another
 * origin (a page on a sibling host that may use the same RP ID), and throttle those failures.
 * The service's sign-in URL is http://gatehouse.localhost:<port>/signin: WebAuthn needs a host name.
 */
describe.skipIf(!HAVE_CHROMIUM)(`security keys and passkeys in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let cdp: CDPSession;
  let base: string;
  let authenticatorId: string;
  const email = 'kim@example.com';

  const addAuthenticator = async () =>
    (
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'usb',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      })
    ).authenticatorId;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://gatehouse.localhost:${port}`;
    s = await startTestService(backends()[0] ?? 'sqlite', { SVC_SERVER_SIGNINURL: `${base}/signin` });
    await s.app.listen({ port, host: '127.0.0.1' });
    const u = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: email, Active: true, Name: { FullName: 'Kim' } },
    });
    const id = String(u.headers['x-id']);
    expect(
      (await s.req({ method: 'PUT', url: `/auth/enroll/password?user=${id}`, payload: { Password: PW } }))
        .statusCode,
    ).toBe(204);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        `--host-resolver-rules=MAP localhost 127.0.0.1, MAP *.localhost 127.0.0.1`,
      ],
    });
    context = await browser.newContext({ viewport: { width: 960, height: 760 } });
    page = await context.newPage();
    cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable', { enableUI: false });
    authenticatorId = await addAuthenticator();
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  const shot = (name: string, fullPage = false) => page.screenshot({ path: `${SHOTS}${name}.png`, fullPage });
  /** POST /auth and sign-out from inside the page (the test's own HTTP client cannot resolve *.localhost). */
  const inPage = (p: Page, method: string, path: string) =>
    p.evaluate(
      ([m, u]) =>
        fetch(u as string, { method: m as string, headers: { 'X-Requested-With': 'test' } }).then(
          async (r) => ({
            status: r.status,
            body: await r.text(),
          }),
        ),
      [method, path],
    );
  const state = async (p: Page = page) => JSON.parse((await inPage(p, 'POST', '/auth')).body);
  async function signOut() {
    expect((await inPage(page, 'POST', '/auth/signout')).status).toBe(204);
  }

  it('registers a key on the security-settings page, then signs in with it after the e-mail step (level 4)', async () => {
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/enroll')}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Password').fill(PW);
    await page.getByRole('button', { name: 'Sign in with password' }).click();
    await page.waitForURL(`${base}/signin/enroll`);
    await page.locator('#st-u2f', { hasText: 'not set up' }).waitFor();
    await page.getByLabel('Name of the new key').fill('Blue key');
    await page.getByRole('button', { name: 'Add a security key or passkey' }).click();
    await page.getByText('Blue key added.').waitFor();
    await page.locator('#keys li', { hasText: 'Blue key (passkey)' }).waitFor();
    await page.locator('#st-u2f', { hasText: '1 registered' }).waitFor();
    await shot('enroll-u2f', true);
    await expectAccessibleBothSchemes(page, 'security settings with a key');
    const creds = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    expect(creds).toHaveLength(1);
    expect(creds[0]?.rpId).toBe('gatehouse.localhost');

    await signOut();
    await page.goto(`${base}/signin?return=${encodeURIComponent('/signin/debug')}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Continue' }).click();
    // The key is offered first (it alone reaches the user's best level); the password is an alternative.
    await page.getByRole('button', { name: 'Use security key' }).waitFor();
    expect(await page.getByRole('button', { name: 'Use password instead' }).isVisible()).toBe(true);
    await shot('signin-u2f');
    await expectAccessibleBothSchemes(page, 'sign-in: the security-key step');
    await page.getByRole('button', { name: 'Use security key' }).click();
    await page.waitForURL(`${base}/signin/debug`);
    expect(await state()).toMatchObject({ Email: email, IntegrityLevel: 4, Proven: ['u2f'] });
  }, 90_000);

  it('passkey: signs in from the e-mail step without a password (the button)', async () => {
    await signOut();
    await page.goto(`${base}/signin`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).waitFor();
    await shot('signin-passkey');
    await expectAccessibleBothSchemes(page, 'sign-in: the e-mail step with the passkey button');
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.locator('#step-done', { hasText: 'Signed in as' }).waitFor();
    expect(await state()).toMatchObject({ Email: email, IntegrityLevel: 4, Proven: ['u2f'] });
  }, 90_000);

  it('refuses a cloned authenticator: the same key with an older signature counter', async () => {
    const [original] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    expect(original?.signCount).toBeGreaterThan(1);
    // The clone holds the same private key, but its counter is behind the original's.
    await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
    const clone = await addAuthenticator();
    await cdp.send('WebAuthn.addCredential', {
      authenticatorId: clone,
      credential: { ...(original as NonNullable<typeof original>), signCount: 0 },
    });
    await signOut();
    await page.goto(`${base}/signin`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.getByText('That security key or passkey was not accepted.').waitFor();
    expect(await state()).toMatchObject({ IntegrityLevel: 0 });
    // Refused for its counter, not for anything else.
    expect(s.logs.filter((l) => l.includes('refused') || l.includes('counter')).at(-1)).toMatch(/counter/);
    // The original, counter moving on, still signs in.
    await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: clone });
    authenticatorId = await addAuthenticator();
    await cdp.send('WebAuthn.addCredential', {
      authenticatorId,
      credential: original as NonNullable<typeof original>,
    });
    await page.goto(`${base}/signin`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.locator('#step-done', { hasText: 'Signed in as' }).waitFor();
    expect(await state()).toMatchObject({ IntegrityLevel: 4 });
  }, 90_000);

  it('passkey autofill: the e-mail step asks with conditional mediation and signs in when a passkey is picked', async () => {
    // Headless Chromium has no autofill pop-up, so it reports conditional mediation as unavailable
    // (isConditionalMediationAvailable() is false). The page is told it is available; everything
    // else is real: the page's request goes to Chromium with mediation "conditional", and the
    // virtual authenticator answers it as a person picking the passkey from the field's list does.
    const ctx2 = await browser.newContext();
    const p3 = await ctx2.newPage();
    const c3 = await ctx2.newCDPSession(p3);
    await c3.send('WebAuthn.enable', { enableUI: false });
    const a3 = (
      await c3.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      })
    ).authenticatorId;
    const [cred] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    await c3.send('WebAuthn.addCredential', {
      authenticatorId: a3,
      credential: cred as NonNullable<typeof cred>,
    });
    await p3.addInitScript({
      content: `
        PublicKeyCredential.isConditionalMediationAvailable = () => Promise.resolve(true);
        const get = navigator.credentials.get.bind(navigator.credentials);
        navigator.credentials.get = (o) => { console.log('mediation: ' + (o && o.mediation)); return get(o); };`,
    });
    const mediations: string[] = [];
    p3.on('console', (m) => {
      if (m.text().startsWith('mediation: ')) mediations.push(m.text().slice(11));
    });
    const finished = p3.waitForResponse((r) => r.url().endsWith('/auth/u2f/finish'));
    await p3.goto(`${base}/signin`);
    expect(await p3.getByLabel('E-mail address').getAttribute('autocomplete')).toBe('username webauthn');
    expect((await finished).status()).toBe(200);
    await p3.locator('#step-done', { hasText: 'Signed in as' }).waitFor();
    expect(mediations).toEqual(['conditional']);
    expect(await state(p3)).toMatchObject({ Email: email, IntegrityLevel: 4 });
    // The original authenticator is one counter step behind now: move it on, as if used here.
    await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
    authenticatorId = await addAuthenticator();
    const [moved] = (await c3.send('WebAuthn.getCredentials', { authenticatorId: a3 })).credentials;
    await cdp.send('WebAuthn.addCredential', {
      authenticatorId,
      credential: moved as NonNullable<typeof moved>,
    });
    await ctx2.close();
  }, 90_000);

  it('refuses another origin (a sibling host using the same RP ID) and throttles the failures', async () => {
    // evil.gatehouse.localhost may ask for RP ID "gatehouse.localhost" (a registrable suffix of
    // its host), so the browser signs; the service expects the sign-in URL's origin and refuses.
    const other = base.replace('//gatehouse.localhost', '//evil.gatehouse.localhost');
    const p2 = await context.newPage();
    const cdp2 = await context.newCDPSession(p2);
    await cdp2.send('WebAuthn.enable', { enableUI: false });
    const [cred] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    const id2 = (
      await cdp2.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'usb',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      })
    ).authenticatorId;
    await cdp2.send('WebAuthn.addCredential', {
      authenticatorId: id2,
      credential: { ...(cred as NonNullable<typeof cred>), signCount: (cred?.signCount ?? 0) + 100 },
    });
    const answers: number[] = [];
    p2.on('response', (r) => {
      if (r.url().endsWith('/auth/u2f/finish')) answers.push(r.status());
    });
    await p2.goto(`${other}/signin`);
    await p2.getByLabel('E-mail address').fill(email);
    await p2.getByRole('button', { name: 'Continue' }).click();
    // The throttle's free failures (USER_POLICY.free, 3), one more that starts the wait, then 429.
    for (let i = 0; i < 5; i++) {
      const answered = p2.waitForResponse((r) => r.url().endsWith('/auth/u2f/finish'));
      await p2.getByRole('button', { name: 'Use security key' }).click();
      await answered;
    }
    await p2.locator('#alert', { hasText: 'Too many attempts' }).waitFor();
    await p2.screenshot({ path: `${SHOTS}signin-u2f-refused.png` });
    expect(answers).toEqual([403, 403, 403, 403, 429]);
    expect(s.logs.some((l) => l.includes('Unexpected authentication response origin'))).toBe(true);
    expect((await state(p2)).IntegrityLevel).toBeLessThan(2);
    await p2.close();
  }, 90_000);
});
