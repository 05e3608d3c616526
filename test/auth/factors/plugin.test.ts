import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { factors } from '../../../src/auth/factors/index.js';
import { memorableFactor } from '../../fixtures/memorable/index.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import { account, attempts, authResponse, Browser, freshIp, signIn } from '../../kit/index.js';

/**
 * A new factor is one folder and one registry line (docs/architecture.md, "How to add a sign-in
 * factor"): test/fixtures/memorable declares a memorable word, the service is given the registry's
 * list plus that line, and everything else comes from the one flow and the pages: its endpoints
 * (validated and documented by their schemas), regulation, the intent, the credential-change
 * rule, the sign-in completion, its form on the sign-in page and its card in the settings.
 */
const WORD = 'plinth-otter';
const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

describe.each(backends())('a factor added as a plug-in, on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend, {}, { factors: [...factors, memorableFactor] });
  });
  afterAll(async () => s?.close());

  async function withWord(tag: string) {
    const a = await account(s, { tag });
    const set = await s.req({
      method: 'PUT',
      url: `/auth/enroll/memorable?user=${a.id}`,
      payload: { Word: WORD },
    });
    expect(set.statusCode, set.body).toBe(204);
    return a;
  }

  it('is served, documented and validated by its declared schema', async () => {
    const doc = (await s.req({ url: '/openapi.json' })).json() as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }>
      >;
    };
    const prove = doc.paths['/auth/memorable']?.post;
    expect(prove?.requestBody?.content['application/x-www-form-urlencoded']?.schema).toMatchObject({
      properties: { word: { type: 'string', maxLength: 64 } },
      required: ['word'],
    });
    expect(doc.paths['/auth/enroll/memorable']?.put).toBeDefined();
    const a = await withWord('plug-schema');
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: a.email })).statusCode).toBe(204);
    const bads: Record<string, string | string[]>[] = [{ word: 'x'.repeat(65) }, { word: ['a', 'b'] }, {}];
    for (const bad of bads) {
      const r = await b.post('/auth/memorable', bad);
      expect(r.statusCode, JSON.stringify(bad)).toBe(400);
      expect(r.headers['x-error-code']).toBe('Invalid Field');
      expect(r.json().Field).toBe('word');
    }
    // An enrolment body is checked as sent: a number is not a word, a short word is refused.
    for (const Word of [1234567, 'short']) {
      const r = await s.req({ method: 'PUT', url: `/auth/enroll/memorable?user=${a.id}`, payload: { Word } });
      expect(r.statusCode, String(Word)).toBe(400);
      expect(r.json().Field).toBe('Word');
    }
  });

  it('proves the word through the flow: completion, level, regulation', async () => {
    const a = await withWord('plug-prove');
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    expect((await b.post('/auth/memorable', { word: WORD })).statusCode).toBe(204);
    const st = await authResponse(b);
    expect(st.Proven).toEqual(['memorable']);
    expect(st.IntegrityLevel).toBe(2);
    // Wrong words are 403, then 429: the flow charged them to this factor's counter.
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    const codes = await attempts(c, '/auth/memorable', { word: 'not-the-word' }, 8);
    expect(codes[0]).toBe(403);
    expect(codes).toContain(429);
    expect((await c.post('/auth/memorable', { word: WORD })).statusCode, 'held while backing off').toBe(429);
  });

  it('changing the word is a credential change: a plain key may not, a weak session must step up', async () => {
    const a = await withWord('plug-change');
    const key = await s.keyFor(['user'], a.id);
    const byKey = await s.req({
      method: 'PUT',
      url: '/auth/enroll/memorable',
      key,
      payload: { Word: 'another-one' },
    });
    expect(byKey.statusCode).toBe(403);
    // Only e-mail named: nothing proven, so the change asks for a step-up (401 with an intent).
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const weak = await b.req({ method: 'PUT', url: '/auth/enroll/memorable', json: { Word: 'another-one' } });
    expect(weak.statusCode).toBe(401);
    const strong = await signIn(s, a, { password: true });
    const ok = await strong.req({
      method: 'PUT',
      url: '/auth/enroll/memorable',
      json: { Word: 'another-one' },
    });
    expect(ok.statusCode, ok.body).toBe(204);
  });

  it('the pages draw it from its description, with no page code of its own', async () => {
    const signin = (await s.req({ url: '/signin', key: '' })).body;
    expect(signin).toContain('<form id="f-memorable" class="factor" hidden>');
    expect(signin).toContain('<label for="memorable">Memorable word</label>');
    const settings = (await s.req({ url: '/signin/enroll', key: '' })).body;
    expect(settings).toContain('<form id="e-memorable" data-secret="Word"');
    // Without the line in its list, a service has none of it.
    const plain = await startTestService(backend);
    try {
      expect((await plain.req({ url: '/signin', key: '' })).body).not.toContain('f-memorable');
      const doc = (await plain.req({ url: '/openapi.json' })).json() as { paths: Record<string, unknown> };
      expect(Object.keys(doc.paths).filter((p) => p.includes('memorable'))).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  it('in Chromium: offered as another way, typed, and the person is signed in', async () => {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI) throw new Error(`${CHROMIUM} is missing and CI=true`);
      process.stdout.write(`\n*** ${CHROMIUM} not installed: the plug-in's page test is skipped ***\n\n`);
      return;
    }
    const a = await withWord('plug-page');
    const base = await s.app.listen({ port: 0, host: '127.0.0.1' });
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    try {
      const page = await (await browser.newContext()).newPage();
      await page.goto(`${base}/signin`);
      await page.getByLabel('E-mail address').fill(a.email);
      await page.getByRole('button', { name: 'Continue' }).click();
      // The password comes first (its rank); the word is offered in its own words.
      await page.getByLabel('Password').waitFor();
      await page.getByRole('button', { name: 'Use your memorable word instead' }).click();
      await page.getByLabel('Memorable word').fill(WORD);
      await page.getByRole('button', { name: 'Continue with the word' }).click();
      await page.locator('#done-how').getByText('You proved who you are with your memorable word.').waitFor();
    } finally {
      await browser.close();
    }
  }, 60_000);
});
