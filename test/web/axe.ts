/// <reference lib="dom" />
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * The automated accessibility check of the browser tests: axe-core (the npm package) evaluated
 * in the page, its rules run on the whole document, and the test fails on any violation whose
 * impact is serious or critical. The script goes in through the DevTools protocol (Playwright's
 * evaluate), so the pages keep their real Content-Security-Policy (script-src 'self') while
 * checked. Run it in both colour schemes where the page has a dark mode: contrast differs.
 */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeFinding {
  id: string;
  impact: string;
  help: string;
  nodes: string[];
}

/** The serious and critical violations axe finds in the page as it is now. */
export async function axeViolations(page: Page): Promise<AxeFinding[]> {
  const loaded = await page.evaluate('typeof window.axe === "object"');
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const { ran, violations } = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<AxeResults> } })
      .axe;
    interface AxeResults {
      violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
      passes: { id: string }[];
    }
    const r = await axe.run(document, { resultTypes: ['violations'] });
    const found = r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({
        id: v.id,
        impact: String(v.impact),
        help: v.help,
        nodes: v.nodes.map((n) => JSON.stringify(n.target)),
      }));
    return { ran: r.passes.map((p) => p.id), violations: found };
  });
  // A check that ran no rule proves nothing: the page must at least have been looked at.
  expect(ran.length, 'axe ran no rule on the page').toBeGreaterThan(5);
  return violations;
}

/** Fails the test, naming the rule and the elements, when axe finds a serious or critical violation. */
export async function expectAccessible(page: Page, where: string): Promise<void> {
  const found = await axeViolations(page);
  expect(found, `${where}: ${JSON.stringify(found, null, 1)}`).toEqual([]);
}

/** expectAccessible in the light and the dark colour scheme (the scheme is left as it was: light). */
export async function expectAccessibleBothSchemes(page: Page, where: string): Promise<void> {
  for (const colorScheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme });
    await expectAccessible(page, `${where} (${colorScheme})`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}
