import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addLink, userLinks } from '../../src/auth/factors/oauth2rp/store.js';
import { sweepDeletedUsers } from '../../src/auth/leftovers.js';
import { authDb } from '../../src/auth/session/db.js';
import { jobsOf } from '../../src/store/service.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { deleteUser, newUserWith, PW, signedIn } from '../kit/index.js';
import { ctxOf } from '../scripts/kit.js';

/*
 * What a deleted user leaves in the sign-in tables (federated links, trusted devices, sessions)
 * is removed by a background sweep, and nobody else's rows ever are: whatever set of users is
 * deleted, merged or kept, and however the sweep pages through the tables.
 */
describe.each(backends())('what deleted users leave behind (%s)', (backend) => {
  let s: TestService;
  let n = 0;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const link = (userId: string, k: number) =>
    addLink(ctxOf(s), {
      issuer: 'https://idp.example',
      subject: `${userId}-${k}`,
      userId,
      appId: 'app',
      email: `${userId}@idp.example`,
    });
  const rowsOf = async (userId: string) => ({
    links: (await userLinks(ctxOf(s), userId)).length,
    devices: (
      await authDb(s).selectFrom('trusted_devices').select('tag').where('user_id', '=', userId).execute()
    ).length,
    sessions: (await authDb(s).selectFrom('sessions').select('id').where('user_id', '=', userId).execute())
      .length,
  });
  /** A user with a password who signed in `signIns` times (a session and a trusted device each). */
  const userWith = async (links: number, signIns: number) => {
    const email = `left${++n}@example.com`;
    const id = await newUserWith(s, { Email: email });
    const r = await s.req({
      method: 'PUT',
      url: `/auth/enroll/password?user=${id}`,
      payload: { Password: PW },
    });
    expect(r.statusCode, r.body).toBe(204);
    for (let k = 0; k < links; k++) await link(id, k);
    for (let k = 0; k < signIns; k++) await signedIn(s, email, PW, { ip: `10.9.${n % 250}.${k + 1}` });
    return id;
  };

  it('the service runs it as a background job; a kept or merged user keeps everything', async () => {
    const kept = await userWith(1, 1);
    const gone = await userWith(2, 2);
    expect(await rowsOf(gone)).toEqual({ links: 2, devices: 2, sessions: 2 });
    await deleteUser(s, gone);
    await jobsOf(s.app.service).runNow('deleted user sweep');
    expect(await rowsOf(gone)).toEqual({ links: 0, devices: 0, sessions: 0 });
    expect(await rowsOf(kept)).toEqual({ links: 1, devices: 1, sessions: 1 });
    // A merged user still exists (disabled, MergedInto): the merge moved its links, none are lost.
    const target = await newUserWith(s, { Email: `target${++n}@example.com` });
    const merged = await newUserWith(s, { Email: `merged${++n}@example.com` });
    await link(merged, 0);
    expect((await s.req({ method: 'POST', url: `/users/${target}/merge?from=${merged}` })).statusCode).toBe(
      204,
    );
    await jobsOf(s.app.service).runNow('deleted user sweep');
    expect((await userLinks(ctxOf(s), target)).map((l) => l.subject)).toEqual([`${merged}-0`]);
  });

  it("whatever is deleted and however it pages, exactly the deleted users' rows go", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            links: fc.integer({ min: 0, max: 2 }),
            signIns: fc.integer({ min: 0, max: 2 }),
            deleted: fc.boolean(),
          }),
          { minLength: 1, maxLength: 5 },
        ),
        fc.integer({ min: 1, max: 3 }),
        async (users, page) => {
          // Whatever earlier runs left behind is swept first, so each run counts only its own.
          await sweepDeletedUsers(s.app.service);
          const made: { id: string; links: number; signIns: number; deleted: boolean }[] = [];
          for (const u of users) made.push({ id: await userWith(u.links, u.signIns), ...u });
          for (const u of made) if (u.deleted) await deleteUser(s, u.id);
          const removed = await sweepDeletedUsers(s.app.service, page);
          const sum = (f: (u: (typeof made)[number]) => number) =>
            made.filter((u) => u.deleted).reduce((t, u) => t + f(u), 0);
          expect(removed).toEqual({
            federatedLinks: sum((u) => u.links),
            trustedDevices: sum((u) => u.signIns),
            sessions: sum((u) => u.signIns),
          });
          for (const u of made)
            expect(await rowsOf(u.id)).toEqual(
              u.deleted
                ? { links: 0, devices: 0, sessions: 0 }
                : { links: u.links, devices: u.signIns, sessions: u.signIns },
            );
        },
      ),
      { numRuns: 10 },
    );
  });
});
