import { Readable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepVideosOfDeparted } from '../../../../src/auth/factors/vouch/sweep.js';
import {
  referenceOwner,
  saveVideo,
  videoInfo,
  vouchOwner,
} from '../../../../src/auth/factors/vouch/videos.js';
import { VouchRequest } from '../../../../src/objects/vouchrequest.js';
import { newId } from '../../../../src/store/objects.js';
import { jobsOf } from '../../../../src/store/service.js';
import { backends, startTestService, type TestService } from '../../../helpers.js';
import { deleteUser as deleteUserBy, newUserWith } from '../../../kit/index.js';
import { ctxOf } from '../../../scripts/kit.js';
import { putReference, webm } from './kit.js';

/*
 * Videos are faces and voices. A background sweep deletes a deleted user's reference video and the
 * recording of a vouch request that was deleted, ended or expired, and never a video still needed:
 * whatever mix of owners, and however it pages through the table.
 */
type RequestFate = 'pending' | 'expired' | 'cancelled' | 'approved' | 'deleted';

describe.each(backends())('videos of deleted users and ended vouch requests (%s)', (backend) => {
  let s: TestService;
  let n = 0;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const newUser = () => newUserWith(s, { Email: `vsweep${++n}@example.com` });
  const deleteUser = (id: string) => deleteUserBy(s, id);
  /** A vouch request of `userId` in the given fate, with its recording stored. */
  const requestWithVideo = async (userId: string, fate: RequestFate) => {
    const id = newId();
    const hour = 3600_000;
    await s.store.systemPut(VouchRequest, id, () => ({
      doc: {
        UserID: userId,
        State: fate === 'expired' || fate === 'deleted' ? 'pending' : fate,
        Reason: '',
        Vouchers: [],
        GroupID: '',
        Level: 3,
        MagicWords: ['apple', 'banjo', 'cactus'],
        ExpireTime: new Date(Date.now() + (fate === 'expired' ? -hour : hour)).toISOString(),
        HaveVideo: true,
        VoucherID: '',
        DecideTime: '0001-01-01T00:00:00Z',
      },
    }));
    await saveVideo(ctxOf(s), vouchOwner(id), ['apple', 'banjo', 'cactus'], Readable.from([webm(3000)]));
    if (fate === 'deleted') await s.store.systemPut(VouchRequest, id, () => null);
    return id;
  };
  const hasVideo = async (owner: string) => (await videoInfo(ctxOf(s), owner)) !== undefined;

  it("the service runs it as a background job: a deleted user's reference video goes, a kept one stays", async () => {
    const kept = await newUser();
    const gone = await newUser();
    for (const u of [kept, gone]) expect((await putReference(s, u, webm(3000))).statusCode).toBe(204);
    await deleteUser(gone);
    await jobsOf(s.app.service).runNow('video sweep');
    expect(await hasVideo(referenceOwner(gone))).toBe(false);
    expect(await hasVideo(referenceOwner(kept))).toBe(true);
  });

  it('whatever the owners and however it pages, exactly the videos nobody needs go', async () => {
    const fates: RequestFate[] = ['pending', 'expired', 'cancelled', 'approved', 'deleted'];
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({ deleted: fc.boolean(), reference: fc.boolean(), requests: fc.subarray(fates) }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.integer({ min: 1, max: 3 }),
        async (users, page) => {
          // Whatever earlier runs left behind is swept first, so each run counts only its own.
          await sweepVideosOfDeparted(ctxOf(s));
          const expectations: { owner: string; kept: boolean }[] = [];
          for (const u of users) {
            const id = await newUser();
            if (u.reference) {
              expect((await putReference(s, id, webm(3000))).statusCode).toBe(204);
              expectations.push({ owner: referenceOwner(id), kept: !u.deleted });
            }
            for (const fate of u.requests)
              expectations.push({
                owner: vouchOwner(await requestWithVideo(id, fate)),
                kept: fate === 'pending',
              });
            if (u.deleted) await deleteUser(id);
          }
          const removed = await sweepVideosOfDeparted(ctxOf(s), page);
          expect(removed).toBe(expectations.filter((e) => !e.kept).length);
          for (const e of expectations) expect(await hasVideo(e.owner), e.owner).toBe(e.kept);
        },
      ),
      { numRuns: 10 },
    );
  });
});
