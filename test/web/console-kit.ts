/**
 * The harness of the admin console's browser tests (test/web/console*.test.ts): the bundle built
 * from src/console, a service listening on a real port, headless Chromium, administrators and
 * users signed in through the real sign-in API, and a page that records every page error and
 * console error so a test can require that there were none.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { type Account, PW, totpCode } from '../kit/index.js';
import { expectAccessibleBothSchemes } from './axe.js';

export const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
export const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the admin console's browser tests are skipped ***\n\n`);
}

/** Screenshots go to docs/screenshots/ only when asked (UPDATE_SCREENSHOTS=1), as in browser.test.ts. */
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-console-shots-'))}/`;

const ROOT = new URL('../..', import.meta.url).pathname;

export interface Harness {
  s: TestService;
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

/** Builds the bundle (the route reads its manifest when it is registered), starts the service and Chromium. */
export async function startConsole(): Promise<Harness> {
  // `npm test` builds the bundle before Vitest runs; rebuilding it here while another file's
  // service serves it would race. Build only when a lone run finds none.
  if (!existsSync(join(ROOT, 'dist/console/manifest.json')))
    execFileSync(process.execPath, [join(ROOT, 'scripts/build-console.mjs')], { cwd: ROOT, stdio: 'pipe' });
  const s = await startTestService(backends()[0] ?? 'sqlite');
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  mkdirSync(SHOTS, { recursive: true });
  return {
    s,
    base,
    browser,
    async close() {
      await browser.close();
      await s.close();
    },
  };
}

export interface Tab {
  context: BrowserContext;
  page: Page;
  /** Page errors and console errors, as Chromium reported them. */
  errors: string[];
}

export async function newTab(h: Harness, colorScheme: 'light' | 'dark' = 'light'): Promise<Tab> {
  const context = await h.browser.newContext({ viewport: { width: 1200, height: 800 }, colorScheme });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  return { context, page, errors };
}

/** Signs the tab's browser in through the sign-in API (the CSRF header the pages send). */
export async function signInTab(
  h: Harness,
  tab: Tab,
  a: Account,
  steps: { password?: boolean; totp?: number },
): Promise<void> {
  const post = async (path: string, form: Record<string, string>) => {
    const r = await tab.context.request.post(`${h.base}${path}`, {
      form,
      headers: { 'X-Requested-With': 'gatehouse' },
    });
    expect(r.status(), `${path}: ${await r.text()}`).toBe(204);
  };
  await post('/auth/email', { email: a.email });
  if (steps.password) await post('/auth/password', { password: PW });
  if (steps.totp !== undefined) await post('/auth/totp', { code: totpCode(a.totp as string, steps.totp) });
}

/** The step-up in place: the "Code" field, a TOTP code `step` steps from now, and the console's first view. */
export async function stepUp(tab: Tab, a: Account, step: number): Promise<void> {
  await tab.page.getByLabel('Code', { exact: true }).fill(totpCode(a.totp as string, step));
  await tab.page.getByRole('button', { name: 'Confirm', exact: true }).click();
}

/** Axe in light and dark (nothing serious or critical), then a screenshot into docs/screenshots/. */
export async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  await expectAccessibleBothSchemes(page, name);
  await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage });
}

/** Errors other than those a test provoked on purpose (matching `expected`). */
export const unexpected = (errors: string[], ...expected: RegExp[]) =>
  errors.filter((e) => !expected.some((x) => x.test(e)));

/** A screenshot in the dark colour scheme (the page is checked in both by shot()). */
export async function shotDark(page: Page, name: string): Promise<void> {
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
  await page.emulateMedia({ colorScheme: 'light' });
}
