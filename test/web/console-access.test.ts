import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Account, account, PW, totpCode } from '../kit/index.js';
import {
  HAVE_CHROMIUM,
  type Harness,
  newTab,
  shot,
  signInTab,
  startConsole,
  stepUp,
  unexpected,
} from './console-kit.js';

/*
 * Who reaches the console and how: a signed-out browser is sent to sign in and comes back; a
 * signed-in non-administrator is refused; the page and its assets carry the security and cache
 * headers; the console is usable by keyboard alone; and a page of another origin can neither
 * act through the API with the administrator's cookie, nor open the event stream, nor frame it.
 */
describe.skipIf(!HAVE_CHROMIUM)(
  'admin console: access, headers, keyboard and cross-site requests',
  { timeout: 90_000 },
  () => {
    let h: Harness;
    // One administrator per test: a TOTP code is accepted once, and only the next time step is left.
    let admin: Account;
    let keyboardAdmin: Account;
    let visitingAdmin: Account;
    let plain: Account;
    let attacker: Server;
    let evil = '';

    beforeAll(async () => {
      h = await startConsole();
      admin = await account(h.s, { admin: true, totp: true, tag: 'accessadmin' });
      keyboardAdmin = await account(h.s, { admin: true, totp: true, tag: 'keyboard' });
      visitingAdmin = await account(h.s, { admin: true, totp: true, tag: 'visiting' });
      plain = await account(h.s, { tag: 'plain' });
      // Another origin on the same site (another port of 127.0.0.1): the session cookie (SameSite=Lax)
      // goes along with its requests, so only the CSRF rule stands between it and the API.
      const base = h.base;
      attacker = createServer((_req, res) => {
        res.setHeader('Content-Type', 'text/html');
        res.end(`<!doctype html><title>elsewhere</title>
<form id="f" method="POST" action="${base}/users" enctype="text/plain"><input name='{"Email":"evil-form@example.com","x":"' value='"}'></form>
<iframe id="frame" src="${base}/console/users"></iframe>`);
      });
      await new Promise<void>((r) => attacker.listen(0, '127.0.0.1', r));
      evil = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
    }, 90_000);
    afterAll(async () => {
      attacker?.close();
      await h?.close();
    });

    it('sends a signed-out browser to sign in, and back to the page it asked for', async () => {
      const tab = await newTab(h);
      const { page } = tab;
      await page.goto(`${h.base}/console/groups`);
      expect(new URL(page.url()).pathname).toBe('/signin');
      expect(new URL(page.url()).searchParams.get('return')).toBe('/console/groups');
      await page.getByLabel('E-mail address').fill(admin.email);
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.getByLabel('Password').fill(PW);
      await page.getByRole('button', { name: 'Sign in with password' }).click();
      await page.getByLabel('Code from your authenticator app').fill(totpCode(admin.totp as string, 1));
      await page.getByRole('button', { name: 'Verify code' }).click();
      await page.waitForURL(`${h.base}/console/groups`);
      const signinErrors = tab.errors.length; // the sign-in page's own refusals are not the console's
      // Two factors proven on the sign-in page: no step-up left to ask for.
      await page.getByRole('heading', { name: 'Groups', level: 1 }).waitFor();
      expect(await page.getByLabel('Code', { exact: true }).count()).toBe(0);
      expect(unexpected(tab.errors.slice(signinErrors))).toEqual([]);
      await tab.context.close();
    }, 60_000);

    it('refuses a signed-in non-administrator with a page that says so', async () => {
      const tab = await newTab(h);
      await signInTab(h, tab, plain, { password: true });
      const res = await tab.page.goto(`${h.base}/console`);
      expect(res?.status()).toBe(403);
      await tab.page.getByRole('heading', { name: 'The console is for administrators' }).waitFor();
      await tab.page.getByText(`You are signed in as ${plain.email}`).waitFor();
      await shot(tab.page, 'console-refused');
      // An API key is not a browser session: the console sends it to sign in.
      const keyed = await h.s.req({ method: 'GET', url: '/console' });
      expect(keyed.statusCode).toBe(303);
      await tab.context.close();
    }, 60_000);

    it('serves the page with a strict CSP and the hashed assets with long-lived cache headers', async () => {
      const tab = await newTab(h);
      await signInTab(h, tab, admin, { password: true });
      const res = await tab.page.goto(`${h.base}/console`);
      const headers = res?.headers() ?? {};
      expect(headers['content-security-policy']).toMatch(/default-src 'none'/);
      expect(headers['content-security-policy']).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['cache-control']).toBe('no-store');
      const html = await res?.text();
      const assets = [...(html ?? '').matchAll(/\/console\/assets\/(console-[A-Z0-9]+\.(?:js|css))/g)].map(
        (m) => m[1],
      );
      expect(assets).toHaveLength(2);
      for (const a of assets) {
        const r = await tab.context.request.get(`${h.base}/console/assets/${a}`);
        expect(r.status()).toBe(200);
        expect(r.headers()['cache-control']).toBe('public, max-age=31536000, immutable');
        expect(r.headers()['x-content-type-options']).toBe('nosniff');
      }
      for (const bad of ['manifest.json', '..%2fpackage.json', 'console-NOPE.js'])
        expect((await tab.context.request.get(`${h.base}/console/assets/${bad}`)).status()).toBe(404);
      // The step-up prompt's other way goes through the sign-in page and returns to the console.
      const other = tab.page.getByRole('link', { name: 'Confirm another way' });
      expect(new URL(String(await other.getAttribute('href')), h.base).searchParams.get('return')).toBe(
        '/console/users',
      );
      await tab.context.close();
    }, 60_000);

    it('is usable by keyboard alone: skip link, navigation, a dialog opened, filled, sent and closed', async () => {
      const tab = await newTab(h);
      const { page } = tab;
      await signInTab(h, tab, keyboardAdmin, { password: true, totp: 1 });
      await page.goto(`${h.base}/console/users`);
      await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
      const focused = () =>
        page.evaluate(() => (document.activeElement as HTMLElement | null)?.textContent?.trim() ?? '');
      await page.keyboard.press('Tab');
      expect(await focused()).toBe('Skip to content');
      // Tab through the navigation to "Groups" and follow it with Enter.
      for (let i = 0; i < 20 && (await focused()) !== 'Groups'; i++) await page.keyboard.press('Tab');
      expect(await focused()).toBe('Groups');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'Groups', level: 1 }).waitFor();
      // The view's heading takes the focus; the next Tab reaches its first control.
      expect(await focused()).toBe('Groups');
      await page.keyboard.press('Tab');
      expect(await focused()).toBe('New group');
      await page.keyboard.press('Enter');
      await page.getByRole('dialog', { name: 'New group' }).waitFor();
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('ng-name');
      await page.keyboard.press('Escape');
      await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
      // The keyboard is back on the button that opened the dialog (the page's script moves it there
      // once the dialog has gone; under load that is a moment after the dialog leaves).
      await expect.poll(focused).toBe('New group');
      await page.keyboard.press('Enter');
      await page.getByRole('dialog', { name: 'New group' }).waitFor();
      await page.keyboard.type('keyboard people');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'keyboard people', level: 1 }).waitFor();
      expect(unexpected(tab.errors)).toEqual([]);
      await tab.context.close();
    }, 60_000);

    it('goes back to sign in when the session ends while the console is open', async () => {
      const ending = await account(h.s, { admin: true, totp: true, tag: 'ending' });
      const tab = await newTab(h);
      await signInTab(h, tab, ending, { password: true, totp: 1 });
      await tab.page.goto(`${h.base}/console/groups`);
      await tab.page.getByRole('heading', { name: 'Groups', level: 1 }).waitFor();
      // Another administrator revokes the session: the stream closes, and does not open again.
      const sessions = await h.s.req({ method: 'GET', url: `/auth/sessions?user=${ending.id}` });
      for (const line of sessions.body.split('\n').filter(Boolean)) {
        const r = await h.s.req({ method: 'DELETE', url: `/auth/sessions/${JSON.parse(line).ID}` });
        expect(r.statusCode).toBe(204);
      }
      await tab.page.waitForURL(/\/signin\?return=%2Fconsole%2Fgroups$/, { timeout: 20_000 });
      await tab.context.close();
    }, 60_000);

    it('refuses cross-site requests: a form post, a fetch, the event stream and framing', async () => {
      const tab = await newTab(h);
      const { page } = tab;
      await signInTab(h, tab, visitingAdmin, { password: true });
      await page.goto(`${h.base}/console/users`);
      await stepUp(tab, visitingAdmin, 1);
      await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
      // The administrator, signed in at the admin level, visits another origin.
      await page.goto(evil);
      // The frame is refused (frame-ancestors 'none', X-Frame-Options: DENY): it holds no console.
      await page.waitForTimeout(300);
      const framed = page.frames().find((f) => f.url().includes('/console'));
      expect(
        (await framed?.evaluate(() => document.getElementById('console') !== null).catch(() => false)) ??
          false,
      ).toBe(false);
      // A fetch with the CSRF header needs a CORS preflight, which the service never grants.
      const fetched = await page.evaluate(async (base) => {
        try {
          const r = await fetch(`${base}/users`, {
            method: 'POST',
            credentials: 'include',
            headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'gatehouse' },
            body: JSON.stringify({ Email: 'evil-fetch@example.com' }),
          });
          return `status ${r.status}`;
        } catch (e) {
          return `refused: ${(e as Error).name}`;
        }
      }, h.base);
      expect(fetched).toBe('refused: TypeError');
      // A simple request (no preflight) reaches the service with the cookie, and is refused there.
      const simple = await page.evaluate(async (base) => {
        await fetch(`${base}/users`, {
          method: 'POST',
          credentials: 'include',
          mode: 'no-cors',
          body: '{"Email":"evil-nocors@example.com"}',
        });
        return 'sent';
      }, h.base);
      expect(simple).toBe('sent');
      // The event stream refuses a handshake from another origin.
      const ws = await page.evaluate(
        (url) =>
          new Promise<string>((resolve) => {
            const s = new WebSocket(url);
            s.onopen = () => resolve('open');
            s.onerror = () => resolve('refused');
            setTimeout(() => resolve('timeout'), 5000);
          }),
        `${h.base.replace('http', 'ws')}/events`,
      );
      expect(ws).toBe('refused');
      // A form post carries the cookie too (same site): refused by the CSRF rule.
      await page.evaluate(() => (document.getElementById('f') as HTMLFormElement).submit());
      await page.waitForURL(`${h.base}/users`);
      expect(await page.content()).toContain('CSRF Check Failed');
      for (const email of ['evil-form', 'evil-fetch', 'evil-nocors']) {
        const found = await h.s.req({
          method: 'GET',
          url: `/users?filter=${encodeURIComponent(`Email = "${email}@example.com"`)}`,
        });
        expect(found.body, email).toBe('');
      }
      const refused = await h.s.req({
        method: 'GET',
        url: `/audit?filter=${encodeURIComponent('Status = 403')}`,
      });
      expect(refused.body.match(/"Path":"\/users"/g)?.length ?? 0).toBeGreaterThanOrEqual(2);
      await tab.context.close();
    }, 60_000);
  },
);
