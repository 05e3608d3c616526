/// <reference lib="dom" />
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../../helpers.js';
import { Browser as ApiBrowser, account, freshIp, levelOf, PW, signIn } from '../../../kit/index.js';
import { expectAccessibleBothSchemes } from '../../../web/axe.js';
import { putReference, teamOf } from './kit.js';

const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the vouching browser test is skipped ***\n\n`);
}
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'gatehouse-shots-'))}/`;

/**
 * The vouching pages in headless Chromium with its fake camera and microphone: the requester
 * records the magic words with MediaRecorder and sends the WebM; a colleague watches both videos
 * and approves; the requester's page learns it and the session is raised.
 */
describe.skipIf(!HAVE_CHROMIUM)(`vouching pages in headless Chromium (${backends()[0]})`, () => {
  let s: TestService;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    s = await startTestService(backends()[0] ?? 'sqlite');
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--use-fake-device-for-media-stream',
        '--use-fake-ui-for-media-stream',
        '--autoplay-policy=no-user-gesture-required',
      ],
    });
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  /** A browser context holding the cookies of an API-side sign-in. */
  async function contextOf(b: ApiBrowser): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    await context.addCookies([...b.cookies].map(([name, value]) => ({ name, value, url: base })));
    return { context, page: await context.newPage() };
  }

  /** Records `ms` of the fake camera with MediaRecorder in the page; the WebM bytes. */
  async function record(page: Page, ms: number): Promise<Buffer> {
    // A string, evaluated in the page (the tests are compiled without the DOM library).
    const b64 = (await page.evaluate(`(async () => {
      const stream = await navigator.mediaDevices.getUserMedia({ video: true, audio: true });
      const rec = new MediaRecorder(stream, { mimeType: 'video/webm' });
      const parts = [];
      rec.ondataavailable = (e) => parts.push(e.data);
      const done = new Promise((r) => { rec.onstop = r; });
      rec.start(200);
      await new Promise((r) => setTimeout(r, ${ms}));
      rec.stop();
      await done;
      for (const t of stream.getTracks()) t.stop();
      const buf = new Uint8Array(await new Blob(parts).arrayBuffer());
      let bin = '';
      for (const x of buf) bin += String.fromCharCode(x);
      return btoa(bin);
    })()`)) as string;
    return Buffer.from(b64, 'base64');
  }

  it('the requester records the words, a colleague compares the videos and approves', {
    timeout: 180_000,
  }, async () => {
    const requester = await account(s, { totp: true, tag: 'pat' });
    const colleague = await account(s, { totp: true, tag: 'sam' });
    for (const [id, name] of [
      [requester.id, 'Pat Requester'],
      [colleague.id, 'Sam Colleague'],
    ] as const) {
      const u = await s.req({ url: `/users/${id}` });
      const put = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        headers: { 'if-match': String(u.headers.etag) },
        payload: { ...(u.json() as Record<string, unknown>), Name: { FullName: name } },
      });
      expect(put.statusCode, put.body).toBe(204);
    }
    await teamOf(s, [requester.id, colleague.id]);

    // A reference video recorded earlier (here: by the same fake camera), set by an administrator
    // (an administrator's change of a credential ends the user's sessions, so before signing in).
    const recorder = await browser.newContext();
    const rp = await recorder.newPage();
    await rp.goto(`${base}/signin`);
    const reference = await record(rp, 1500);
    await recorder.close();
    expect(reference.subarray(0, 4).toString('hex')).toBe('1a45dfa3');
    expect((await putReference(s, requester.id, reference, 'apple,banjo,cactus')).statusCode).toBe(204);

    // The requester lost the TOTP device: signed in with the password only (level 2).
    const apiR = new ApiBrowser(s, { ip: freshIp() });
    expect((await apiR.post('/auth/email', { email: requester.email })).statusCode).toBe(204);
    expect((await apiR.post('/auth/password', { password: PW })).statusCode).toBe(204);
    const r = await contextOf(apiR);
    await r.page.goto(`${base}/signin/vouch`);

    await r.page.getByLabel(/Note for your colleague/).fill('Lost my phone on the train');
    await r.page.screenshot({ path: `${SHOTS}vouch-ask.png` });
    await expectAccessibleBothSchemes(r.page, 'vouch-ask');
    await r.page.getByRole('button', { name: 'Ask for a vouch' }).click();
    await r.page
      .locator('#v-words')
      .filter({ hasText: '·' })
      .waitFor({ timeout: 15_000 })
      .catch(async (e) => {
        throw new Error(`${e}; page ${r.page.url()} says: ${await r.page.locator('#alert').textContent()}`);
      });
    const words = (await r.page.locator('#v-words').textContent())?.split(' · ') ?? [];
    expect(words).toHaveLength(4);
    await r.page.getByText('Camera ready.').waitFor();
    await r.page.screenshot({ path: `${SHOTS}vouch-record.png` });
    await expectAccessibleBothSchemes(r.page, 'vouch-record');
    await r.page.getByRole('button', { name: 'Start recording' }).click();
    await r.page.waitForTimeout(2500);
    await r.page.getByRole('button', { name: 'Stop and send' }).click();
    await r.page.locator('#v-wait').waitFor({ state: 'visible' });
    const link = (await r.page.locator('#v-link').getAttribute('href')) as string;
    expect(link).toMatch(new RegExp(`^${base}/signin/vouch/[A-Za-z0-9]+$`));
    await r.page.screenshot({ path: `${SHOTS}vouch-waiting.png` });
    await expectAccessibleBothSchemes(r.page, 'vouch-waiting');

    // What MediaRecorder produced was stored as it was sent: a WebM file.
    const id = link.split('/').pop() as string;
    const stored = await s.db.kysely
      .withTables<{ videos: { owner: string; size: number; complete: number } }>()
      .selectFrom('videos')
      .selectAll()
      .where('owner', '=', `vouch:${id}`)
      .executeTakeFirst();
    expect(stored?.complete).toBe(1);
    expect(Number(stored?.size)).toBeGreaterThan(1000);

    // The colleague signs in with both factors and opens the link.
    const apiC = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const c = await contextOf(apiC);
    await c.page.goto(link);
    await c.page.locator('#d-actions').waitFor({ state: 'visible' });
    expect(await c.page.locator('#d-words').textContent()).toBe(words.join(' · '));
    await expect.poll(() => c.page.locator('#d-who').textContent()).toContain(requester.email);
    // Both videos load in the page (real WebM from the database, streamed), without error.
    await c.page.waitForFunction(
      () =>
        ['d-ref', 'd-new'].every((i) => {
          const v = document.getElementById(i) as HTMLVideoElement;
          return v.readyState >= 2 && !v.error;
        }),
      undefined,
      { timeout: 20_000 },
    );
    await c.page.screenshot({ path: `${SHOTS}vouch-decide.png`, fullPage: true });
    await expectAccessibleBothSchemes(c.page, 'vouch-decide');
    await c.page.getByRole('button', { name: 'Yes, approve' }).click();
    await c.page.getByText(/you vouched for/).waitFor();
    await c.page.screenshot({ path: `${SHOTS}vouch-approved.png` });
    await expectAccessibleBothSchemes(c.page, 'vouch-approved');

    // The requester's page learns it; the session is at level 3 now.
    await r.page.getByText('Your colleague vouched for you').waitFor({ timeout: 15_000 });
    await r.page.screenshot({ path: `${SHOTS}vouch-done.png` });
    await expectAccessibleBothSchemes(r.page, 'vouch-done');
    const level = await r.page.evaluate(
      `fetch('/auth', { method: 'POST', headers: { 'X-Requested-With': 'gatehouse' } }).then((res) => res.json()).then((j) => j.IntegrityLevel)`,
    );
    expect(level).toBe(3);
    expect(await levelOf(apiC)).toBe(3);
    await r.context.close();
    await c.context.close();
  });

  it('a user records their own reference video; with more factors than proven, the page steps up first', {
    timeout: 120_000,
  }, async () => {
    // Password only: a password session reaches what the factors reach, so it may set the video.
    const pat = await account(s, { tag: 'ref' });
    const apiP = await signIn(s, pat, { password: true }, { level: 2 });
    const p = await contextOf(apiP);
    await p.page.goto(`${base}/signin/vouch/reference`);
    await p.page.getByText('You have no reference video yet.').waitFor();
    await p.page.getByText('Camera ready.').waitFor();
    const words = ((await p.page.locator('#f-words').textContent()) ?? '').split(' · ');
    expect(words).toHaveLength(4);
    await p.page.getByRole('button', { name: 'Start recording' }).click();
    await p.page.waitForTimeout(1500);
    await p.page.getByRole('button', { name: 'Stop and save' }).click();
    await p.page.getByText('Your reference video is saved.').waitFor();
    await p.page.getByText(/You have a reference video/).waitFor();
    await p.page.waitForFunction(
      () => (document.getElementById('f-current') as HTMLVideoElement).readyState >= 1,
    );
    await p.page.screenshot({ path: `${SHOTS}vouch-reference.png`, fullPage: true });
    await expectAccessibleBothSchemes(p.page, 'vouch-reference');
    const stored = await s.req({ url: `/users/${pat.id}/reference-video` });
    expect(stored.statusCode).toBe(200);
    expect(stored.headers['x-magic-words']).toBe(words.join(','));
    expect(stored.rawPayload.subarray(0, 4).toString('hex')).toBe('1a45dfa3');
    await p.context.close();

    // Password + TOTP, signed in with the password only: saving sends the person to step up.
    const kim = await account(s, { totp: true, tag: 'kim' });
    const apiK = await signIn(s, kim, { password: true }, { level: 2 });
    const k = await contextOf(apiK);
    await k.page.goto(`${base}/signin/vouch/reference`);
    await k.page.getByText('Camera ready.').waitFor();
    await k.page.getByRole('button', { name: 'Start recording' }).click();
    await k.page.waitForTimeout(1000);
    await k.page.getByRole('button', { name: 'Stop and save' }).click();
    await k.page.waitForURL(/\/signin\?intent=/);
    expect(new URL(k.page.url()).searchParams.get('return')).toBe('/signin/vouch/reference');
    expect((await s.req({ url: `/users/${kim.id}/reference-video` })).statusCode).toBe(404);
    await k.context.close();
  });
});
