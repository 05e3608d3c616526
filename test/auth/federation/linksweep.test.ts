import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addLink, userLinks } from '../../../src/auth/factors/oauth2rp/store.js';
import { sweepLinksOfDeletedUsers } from '../../../src/auth/factors/oauth2rp/sweep.js';
import { jobsOf } from '../../../src/store/service.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import { deleteUser as deleteUserBy, newUserWith } from '../../kit/index.js';
import { ctxOf } from '../../scripts/kit.js';

/*
 * A deleted user's federated links (issuer, subject, the address the provider gave) are removed
 * by a background sweep, and nobody else's ever are: whatever set of users is deleted, merged or
 * kept, and however the sweep pages through the table.
 */
describe.each(backends())('federated links of deleted users (%s)', (backend) => {
  let s: TestService;
  let n = 0;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const newUser = () => newUserWith(s, { Email: `sweep${++n}@example.com` });
  const deleteUser = (id: string) => deleteUserBy(s, id);
  const link = (userId: string, k: number) =>
    addLink(ctxOf(s), {
      issuer: 'https://idp.example',
      subject: `${userId}-${k}`,
      userId,
      appId: 'app',
      email: `${userId}@idp.example`,
    });

  it("the service runs it as a background job, and it removes only the deleted users' links", async () => {
    const kept = await newUser();
    const gone = await newUser();
    await link(kept, 0);
    await link(gone, 0);
    await link(gone, 1);
    await deleteUser(gone);
    await jobsOf(s.app.service).runNow('federated link sweep');
    expect(await userLinks(ctxOf(s), gone)).toEqual([]);
    expect((await userLinks(ctxOf(s), kept)).map((l) => l.subject)).toEqual([`${kept}-0`]);
    // A merged user still exists (disabled, MergedInto): the merge moved its links, none are lost.
    const target = await newUser();
    const merged = await newUser();
    await link(merged, 0);
    expect((await s.req({ method: 'POST', url: `/users/${target}/merge?from=${merged}` })).statusCode).toBe(
      204,
    );
    await jobsOf(s.app.service).runNow('federated link sweep');
    expect((await userLinks(ctxOf(s), target)).map((l) => l.subject)).toEqual([`${merged}-0`]);
  });

  it("whatever is deleted and however it pages, exactly the deleted users' links go", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ links: fc.integer({ min: 1, max: 3 }), deleted: fc.boolean() }), {
          minLength: 1,
          maxLength: 7,
        }),
        fc.integer({ min: 1, max: 4 }),
        async (users, page) => {
          // Whatever earlier runs left behind is swept first, so each run counts only its own.
          await sweepLinksOfDeletedUsers(ctxOf(s));
          const made: { id: string; links: number; deleted: boolean }[] = [];
          for (const u of users) {
            const id = await newUser();
            for (let k = 0; k < u.links; k++) await link(id, k);
            made.push({ id, ...u });
          }
          for (const u of made) if (u.deleted) await deleteUser(u.id);
          const removed = await sweepLinksOfDeletedUsers(ctxOf(s), page);
          expect(removed).toBe(made.filter((u) => u.deleted).reduce((sum, u) => sum + u.links, 0));
          for (const u of made)
            expect((await userLinks(ctxOf(s), u.id)).length).toBe(u.deleted ? 0 : u.links);
        },
      ),
      { numRuns: 12 },
    );
  });
});
