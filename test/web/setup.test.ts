import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSetupLink, setupLinkUser } from '../../src/auth/setuplinks.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account } from '../kit/index.js';

/**
 * The one-time sign-in URL (/signin/setup) attacked: no guessed, altered or expired code opens
 * the page or signs anyone in, a link of one user never serves another, a new link voids the
 * old, and the code is never written to the log.
 */
describe.each(backends())('one-time sign-in URLs on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const post = (code: string, password = 'a long enough pass phrase') =>
    s.req({
      method: 'POST',
      url: '/signin/setup',
      key: '',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ code, password, password2: password }).toString(),
    });

  it('no guessed or altered code opens the page or signs in (generated codes)', async () => {
    const a = await account(s, { tag: 'guess', admin: true, password: false });
    const real = await createSetupLink({ db: s.db }, a.id, 3600);
    const code = fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      // The real code with one character changed, or cut, or lengthened.
      fc.nat({ max: 42 }).map((i) => `${real.slice(0, i)}${real[i] === 'A' ? 'B' : 'A'}${real.slice(i + 1)}`),
      fc.nat({ max: 42 }).map((i) => real.slice(0, i)),
      fc.constant(`${real}A`),
      fc.constant(real.toLowerCase() === real ? real.toUpperCase() : real.toLowerCase()),
    );
    await fc.assert(
      fc.asyncProperty(code, async (c) => {
        fc.pre(c !== real);
        const page = await s.req({ url: `/signin/setup?code=${encodeURIComponent(c)}`, key: '' });
        expect([400, 410]).toContain(page.statusCode);
        const r = await post(c);
        expect([400, 410]).toContain(r.statusCode);
        expect(r.headers['set-cookie']).toBeUndefined();
      }),
      { numRuns: 60 },
    );
    // The real one still works after all that, once.
    expect((await post(real)).statusCode).toBe(303);
    expect((await post(real)).statusCode).toBe(410);
  }, 120_000);

  it('expires, a new link voids the old one, and links of different users stay apart', async () => {
    const a = await account(s, { tag: 'expire', admin: true, password: false });
    const b = await account(s, { tag: 'other', admin: true, password: false });
    const short = await createSetupLink({ db: s.db }, a.id, 1);
    expect(await setupLinkUser({ db: s.db }, short)).toBe(a.id);
    await new Promise((r) => setTimeout(r, 1100));
    expect(await setupLinkUser({ db: s.db }, short)).toBeUndefined();
    expect((await post(short)).statusCode).toBe(410);
    const first = await createSetupLink({ db: s.db }, a.id, 3600);
    const forB = await createSetupLink({ db: s.db }, b.id, 3600);
    const second = await createSetupLink({ db: s.db }, a.id, 3600);
    expect(await setupLinkUser({ db: s.db }, first)).toBeUndefined();
    expect(await setupLinkUser({ db: s.db }, second)).toBe(a.id);
    expect(await setupLinkUser({ db: s.db }, forB)).toBe(b.id);
    const used = await post(forB);
    expect(used.statusCode).toBe(303);
    const cookie = (used.headers['set-cookie'] as string[] | string | undefined) ?? [];
    // The session cookie is set twice (identified, then raised by the password): the last one counts.
    const byName = new Map(
      (Array.isArray(cookie) ? cookie : [cookie]).map((c) => {
        const pair = c.split(';')[0] ?? '';
        return [pair.slice(0, pair.indexOf('=')), pair] as const;
      }),
    );
    const jar = [...byName.values()].join('; ');
    const me = await s.req({ url: '/users/me', key: '', headers: { cookie: jar } });
    expect(me.statusCode).toBe(200);
    expect(me.json().ID).toBe(b.id);
    for (const code of [short, first, second, forB]) expect(s.logs.some((l) => l.includes(code))).toBe(false);
  }, 60_000);

  it('a disabled administrator cannot use a link made before', async () => {
    const a = await account(s, { tag: 'disabled', admin: true, password: false });
    const code = await createSetupLink({ db: s.db }, a.id, 3600);
    const read = await s.req({ url: `/users/${a.id}` });
    const put = await s.req({
      method: 'PUT',
      url: `/users/${a.id}`,
      headers: { 'if-match': read.headers.etag as string },
      payload: { ...(read.json() as Record<string, unknown>), Disabled: true },
    });
    expect(put.statusCode).toBe(204);
    const r = await post(code);
    expect(r.statusCode).toBe(403);
    expect(r.headers['set-cookie']).toBeUndefined();
  }, 60_000);
});
