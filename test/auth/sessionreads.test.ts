import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, type Browser, signIn } from '../kit/index.js';

/*
 * On PostgreSQL the session lookups by token of one turn of the event loop go to the database as
 * one statement (src/auth/session/rows.ts, src/store/readbatch.ts). Whatever the gathering, each
 * cookie must find its own session and no other, and a session that ended must not be found by a
 * lookup asked after the end was answered.
 */
describe.each(backends())('session lookups side by side on %s', (backend) => {
  let s: TestService;
  const people: { email: string; browser: Browser }[] = [];

  beforeAll(async () => {
    s = await startTestService(backend);
    for (let i = 0; i < 8; i++) {
      const a = await account(s, { tag: `side-${i}` });
      people.push({ email: a.email, browser: await signIn(s, a, { password: true }) });
    }
  });
  afterAll(async () => s?.close());

  /** GET /users/me by everyone at once; `cookies` replaces a browser's own cookie header. */
  const everyoneAtOnce = (cookies = new Map<Browser, string>()) =>
    Promise.all(
      people.map(async (p) => {
        const cookie = cookies.get(p.browser);
        const r = await p.browser.req({ url: '/users/me', ...(cookie ? { headers: { cookie } } : {}) });
        return r.statusCode === 200 ? r.json().Email : r.statusCode;
      }),
    );

  it('each cookie finds its own session, asked all at once, again and again', async () => {
    for (let round = 0; round < 5; round++)
      expect(await everyoneAtOnce()).toEqual(people.map((p) => p.email));
  });

  it('a session that ended is not found by the lookups after it, the others still are', async () => {
    const [gone, ...rest] = people;
    if (!gone) throw new Error('no one signed in');
    const kept = [...gone.browser.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    expect(gone.browser.session).toBeTruthy();
    const out = await gone.browser.post('/auth/signout');
    expect(out.statusCode).toBeLessThan(400);
    // The ended session's cookie, replayed beside the others.
    expect(await everyoneAtOnce(new Map([[gone.browser, kept]]))).toEqual([401, ...rest.map((p) => p.email)]);
  });
});
