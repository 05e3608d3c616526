import { sweepKeys } from '../../../core/keysweep.js';
import { User } from '../../../objects/user.js';
import { VouchRequest } from '../../../objects/vouchrequest.js';
import { jobsOf, type ServiceContext } from '../../../store/service.js';
import { isExpired } from './lifecycle.js';
import { deleteCompleteVideos, videoOwners } from './videos.js';

/** How often the service deletes videos whose owner is gone or done with them. */
export const VIDEO_SWEEP_INTERVAL_MS = 10 * 60 * 1000;
/** Owners read per page: the sweep never holds the whole table in memory. */
const PAGE = 500;

/**
 * The owners of a page that no longer need their videos: a reference video's user is gone (one
 * statement for the page); a vouch request's recording is needed while the request is pending and
 * not past its ExpireTime (vouchers see it only then; cancel, decline and approval delete it at
 * once). An owner of a kind not known here keeps its video: the sweep deletes only what it
 * understands.
 */
async function ownersDone(ctx: ServiceContext, owners: string[]): Promise<string[]> {
  const users = owners.filter((o) => o.startsWith('ref:')).map((o) => o.slice(4));
  const live = await ctx.store.existing(User, users);
  const done = users.filter((id) => !live.has(id)).map((id) => `ref:${id}`);
  for (const owner of owners) {
    if (!owner.startsWith('vouch:')) continue;
    const request = await ctx.store.get(VouchRequest, owner.slice(6));
    if (request?.doc.State !== 'pending' || isExpired(request.doc)) done.push(owner);
  }
  return done;
}

/**
 * Videos are faces and voices: a deleted user's reference video, and the recording of a vouch
 * request that was deleted or expired, were kept for good before this sweep. It deletes them
 * (complete videos only; abandoned uploads have a sweep of their own). IDs are never reused and
 * an absent object is read from the database (the row cache holds no absences), so an owner found
 * gone stays gone. Returns how many videos went.
 */
export function sweepVideosOfDeparted(ctx: ServiceContext, page = PAGE): Promise<number> {
  return sweepKeys({
    page,
    list: (after, limit) => videoOwners(ctx, after, limit),
    gone: (owners) => ownersDone(ctx, owners),
    drop: (owner) => deleteCompleteVideos(ctx, owner),
  });
}

/** Runs the sweep every VIDEO_SWEEP_INTERVAL_MS among the service's background jobs (src/core/jobs.ts). */
export function scheduleVideoSweep(ctx: ServiceContext) {
  jobsOf(ctx).every('video sweep', VIDEO_SWEEP_INTERVAL_MS, async () => {
    const removed = await sweepVideosOfDeparted(ctx);
    if (removed > 0) ctx.logger.info({ removed }, 'videos of deleted users and ended vouch requests removed');
  });
}
