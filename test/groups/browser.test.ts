import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { checkMembership } from '../../src/groups/check.js';
import { makeUser } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';
import { expectAccessibleBothSchemes } from '../web/axe.js';
import { create } from './fixture.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = new URL('../../docs/screenshots/', import.meta.url).pathname;
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

describe.each(backends())('access request in headless Chromium on %s', (backend) => {
  let s: TestService;
  let browser: Browser;
  let base: string;
  let app: Server;
  let appOrigin: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    base = await s.app.listen({ port: 0, host: '127.0.0.1' });
    // The application the user came from: the access request returns there.
    app = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<h1 id="landed">landed at ${req.url}</h1>`);
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    await setTenant(s, { AllowedReturnOrigins: [appOrigin] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((r) => app?.close(r));
    await s?.close();
  });

  async function userWithPassword(email: string) {
    const password = `pw-${email}-long-enough`;
    return { id: await makeUser(s, { email, password }), email, password };
  }

  async function signedInContext(u: { email: string; password: string }) {
    const context = await browser.newContext();
    const headers = { 'x-requested-with': 'playwright' };
    const e = await context.request.post(`${base}/auth/email`, { form: { email: u.email }, headers });
    expect(e.status()).toBe(204);
    const p = await context.request.post(`${base}/auth/password`, {
      form: { password: u.password },
      headers,
    });
    expect(p.status()).toBe(204);
    return context;
  }

  it('a user requests access, an approver approves in another context, the user activates and lands on next', async () => {
    const approver = await userWithPassword(`approver-${backend}@example.com`);
    const user = await userWithPassword(`user-${backend}@example.com`);
    const g = await create(s, 'groups', {
      Name: 'Payroll, "EU"',
      RequiresApproval: true,
      RequiresActivation: true,
      Approvers: [approver.id],
    });
    // The proxy's access check says where to send the user.
    const ctx = {
      store: s.store,
      db: s.db,
      logger: s.app.log as never,
      config: loadServiceConfig({ env: {} }),
    };
    const next = `${appOrigin}/payroll?month=11`;
    const relative = await checkMembership(ctx, user.id, [g], 'and', { next });
    expect(relative.StatusCode).toBe(403);
    expect(relative.Location).toBe(`/signin/groups/${g}?next=${encodeURIComponent(next)}`);
    const denied = await checkMembership(ctx, user.id, [g], 'and', { next, origin: base });
    expect(denied.Location).toBe(`${base}/signin/groups/${g}?next=${encodeURIComponent(next)}`);

    const userContext = await signedInContext(user);
    const page = await userContext.newPage();
    await page.goto(denied.Location as string);
    expect(await page.locator('h1').textContent()).toBe('Access to Payroll, "EU"');
    await expectAccessibleBothSchemes(page, 'access request page');
    if (process.env.UPDATE_SCREENSHOTS && backend === 'sqlite')
      for (const colorScheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme });
        await page.screenshot({
          path: `${SHOTS}ui-access-request${colorScheme === 'dark' ? '-dark' : ''}.png`,
        });
      }
    await page.fill('#reason', 'month-end close, ticket 7');
    await page.click('#request');
    await page.waitForSelector('#state[data-state="requested"]');

    const approverContext = await signedInContext(approver);
    const ap = await approverContext.newPage();
    await ap.goto(`${base}/signin/approvals`);
    const row = ap.locator(`tr[data-user="${user.id}"]`);
    await expectAccessibleBothSchemes(ap, 'approvals page');
    expect(await row.locator('td').nth(2).textContent()).toBe('month-end close, ticket 7');
    await row.locator('input[name="reason"]').fill('approved for November');
    await row.locator('button[value="approve"]').click();
    await ap.waitForSelector('#done');
    expect(await ap.locator('#empty').count()).toBe(1);

    await page.reload();
    await page.waitForSelector('#state[data-state="approved"]');
    await expectAccessibleBothSchemes(page, 'access request page, approved');
    await page.click('#activate');
    await page.waitForURL(next);
    expect(await page.locator('#landed').textContent()).toBe('landed at /payroll?month=11');

    const granted = await checkMembership(ctx, user.id, [g], 'and', { next });
    expect(granted.StatusCode).toBe(200);
    const report = await s.req({ method: 'GET', url: '/groups/report.csv' });
    expect(report.body).toContain('approved for November');
    await userContext.close();
    await approverContext.close();
  });
});
