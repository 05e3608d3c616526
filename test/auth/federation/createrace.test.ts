import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProviderIdentity, resolveUser } from '../../../src/auth/factors/oauth2rp/account.js';
import { addLink, findLink } from '../../../src/auth/factors/oauth2rp/store.js';
import { backends, startTestService, type TestService } from '../../helpers.js';

/*
 * Two first sign-ins through the same provider identity at once (a double submit, two tabs, a
 * retried callback) with App.OAuth2.CreateUsers: both must sign in as one user, and no second,
 * unlinked user may be left behind.
 */
describe.each(backends())('first sign-ins of one identity at once (%s)', (backend) => {
  let s: TestService;
  let n = 0;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const usersNamed = async (name: string) =>
    (await s.req({ url: `/users?filter=${encodeURIComponent(`Name.FullName = "${name}"`)}` })).body
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { ID: string }).ID);

  for (const verified of [false, true])
    it(`${verified ? 'with' : 'without'} a verified address: one user, every sign-in as it`, async () => {
      for (let round = 0; round < 5; round++) {
        const name = `Racer ${verified} ${++n}`;
        const who: ProviderIdentity = {
          issuer: 'https://idp.example',
          subject: `racer-${verified}-${n}`,
          email: `racer${n}@idp.example`,
          emailVerified: verified,
          name,
          level: 2,
        };
        const ids = await Promise.all([0, 1, 2].map(() => resolveUser(s.app.service, 'app', who, '', true)));
        const linked = (await findLink(s.app.service, who.issuer, who.subject))?.user_id;
        expect(linked).toBeDefined();
        expect(ids).toEqual([linked, linked, linked]);
        expect(await usersNamed(name)).toEqual([linked]);
      }
    });

  it("a just-made holder of the address is waited for as another sign-in's, never taken", async () => {
    const made = async (email: string) =>
      String((await s.req({ method: 'POST', url: '/users', payload: { Email: email } })).headers['x-id']);
    const who = (k: string): ProviderIdentity => ({
      issuer: 'https://idp.example',
      subject: `holder-${k}`,
      email: `holder-${k}@idp.example`,
      emailVerified: true,
      name: '',
      level: 2,
    });
    // The other sign-in links the user it made a moment later: this one signs in as that user.
    const linked = who('linked');
    const theirs = await made(linked.email);
    const pending = resolveUser(s.app.service, 'app', linked, '', true);
    await new Promise((r) => setTimeout(r, 100));
    await addLink(s.app.service, { ...linked, userId: theirs, appId: 'app' });
    expect(await pending).toBe(theirs);
    // Nobody links it: an account with the address that this identity may not take (403).
    const unlinked = who('unlinked');
    await made(unlinked.email);
    // The wait for a link is bounded in time: an unbounded one would never settle this promise.
    await expect(resolveUser(s.app.service, 'app', unlinked, '', true)).rejects.toMatchObject({
      code: 'Account Not Linked',
    });
    expect(await findLink(s.app.service, unlinked.issuer, unlinked.subject)).toBeUndefined();
  });
});
