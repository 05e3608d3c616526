import { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import { ApiError } from '../../../core/errors.js';
import { newId } from '../../../store/objects.js';
import { runBesideOtherWriters } from '../../../store/otherwriters.js';
import type { ServiceContext } from '../../../store/service.js';
import { checkWebmHeader, MAX_HEADER } from './webm.js';

/**
 * Videos (reference videos of users, recordings of vouch requests) in the database, in tables of
 * their own (migration 0006_vouch_videos), the same on SQLite and PostgreSQL:
 *
 * - `videos`: one row per stored video: its owner ("ref:<userId>" or "vouch:<requestId>"), the
 *   magic words said in it, its size and number of chunks, and whether the upload completed;
 * - `video_chunks`: the bytes, in chunks of CHUNK_BYTES (BLOB / bytea), keyed (video, seq).
 *
 * An upload is read from the request as it arrives and written chunk by chunk under a new video
 * ID, so neither an upload nor a download ever holds more than a chunk or two in memory. Only
 * when the last chunk is stored does one short transaction mark it complete and delete the
 * owner's previous video: readers see the old video or the new one, never a part. An upload that
 * fails (too large, not WebM, the client went away) deletes its chunks; one that a crash left
 * behind is deleted by the next upload's sweep.
 */
export const VIDEO_LIMIT = 20 * 1024 * 1024;
export const CHUNK_BYTES = 256 * 1024;
/** An incomplete upload older than this was abandoned (a crash): the sweep deletes it. */
const ABANDONED_MS = 3600_000;

export interface VideosTable {
  id: string;
  owner: string;
  words: string;
  size: number;
  chunks: number;
  complete: number;
  create_time: number;
}
export interface VideoChunksTable {
  video_id: string;
  seq: number;
  data: Buffer;
}
type Tables = { videos: VideosTable; video_chunks: VideoChunksTable };
const vdb = (ctx: Pick<ServiceContext, 'db'>): Kysely<Tables> =>
  ctx.db.kysely.withTables<Tables>() as unknown as Kysely<Tables>;

export const referenceOwner = (userId: string) => `ref:${userId}`;
export const vouchOwner = (requestId: string) => `vouch:${requestId}`;

export interface VideoInfo {
  id: string;
  words: string[];
  size: number;
  chunks: number;
}

async function dropVideo(db: Kysely<Tables>, id: string) {
  await db.deleteFrom('video_chunks').where('video_id', '=', id).execute();
  await db.deleteFrom('videos').where('id', '=', id).execute();
}

/**
 * Stores a WebM video read from `body` as the owner's video (replacing the previous one when
 * the upload completes). 413 beyond VIDEO_LIMIT (at once when Content-Length says so), 415 when
 * the bytes are not WebM, 400 when empty.
 */
export async function saveVideo(
  ctx: Pick<ServiceContext, 'db'>,
  owner: string,
  words: readonly string[],
  body: AsyncIterable<Buffer | string>,
  declaredLength?: number,
): Promise<VideoInfo> {
  if (declaredLength !== undefined && declaredLength > VIDEO_LIMIT)
    throw new ApiError('PayloadTooLarge', `a video may be at most ${VIDEO_LIMIT} bytes`);
  const db = vdb(ctx);
  await sweepAbandoned(db);
  const id = newId();
  await db
    .insertInto('videos')
    .values({ id, owner, words: words.join(','), size: 0, chunks: 0, complete: 0, create_time: Date.now() })
    .execute();
  let size = 0;
  let seq = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let headerOk = false;
  const flush = async (all: boolean) => {
    while (pendingBytes >= CHUNK_BYTES || (all && pendingBytes > 0)) {
      const joined = Buffer.concat(pending, pendingBytes);
      const data = joined.subarray(0, CHUNK_BYTES);
      const rest = joined.subarray(data.length);
      pending = rest.length > 0 ? [Buffer.from(rest)] : [];
      pendingBytes = rest.length;
      await db
        .insertInto('video_chunks')
        .values({ video_id: id, seq, data: Buffer.from(data) })
        .execute();
      seq++;
    }
  };
  try {
    for await (const piece of body) {
      const buf = typeof piece === 'string' ? Buffer.from(piece) : piece;
      size += buf.length;
      if (size > VIDEO_LIMIT)
        throw new ApiError('PayloadTooLarge', `a video may be at most ${VIDEO_LIMIT} bytes`);
      pending.push(buf);
      pendingBytes += buf.length;
      if (!headerOk) {
        const verdict = checkWebmHeader(Buffer.concat(pending, pendingBytes).subarray(0, MAX_HEADER));
        if (verdict === 'more') continue;
        if (verdict !== 'ok') throw new ApiError('UnsupportedMediaType', verdict);
        headerOk = true;
      }
      await flush(false);
    }
    if (size === 0) throw new ApiError('BadRequest', 'the body is empty: send the WebM video');
    if (!headerOk)
      throw new ApiError('UnsupportedMediaType', 'the body is not a WebM video (header incomplete)');
    await flush(true);
    await runBesideOtherWriters(ctx.db, () =>
      db.transaction().execute(async (tx) => {
        const old = await tx
          .selectFrom('videos')
          .select('id')
          .where('owner', '=', owner)
          .where('id', '!=', id)
          .execute();
        for (const o of old) await dropVideo(tx, o.id);
        await tx.updateTable('videos').set({ size, chunks: seq, complete: 1 }).where('id', '=', id).execute();
      }),
    );
  } catch (e) {
    await dropVideo(db, id).catch(() => undefined);
    throw e;
  }
  return { id, words: [...words], size, chunks: seq };
}

/** The owner's complete video, without its bytes. */
export async function videoInfo(
  ctx: Pick<ServiceContext, 'db'>,
  owner: string,
): Promise<VideoInfo | undefined> {
  const row = await vdb(ctx)
    .selectFrom('videos')
    .selectAll()
    .where('owner', '=', owner)
    .where('complete', '=', 1)
    .orderBy('create_time', 'desc')
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    words: row.words === '' ? [] : row.words.split(','),
    size: Number(row.size),
    chunks: Number(row.chunks),
  };
}

/**
 * The video's bytes as a stream that reads one chunk from the database each time the consumer
 * asks for more (so a slow reader holds one chunk, not the video). A video replaced while it is
 * being read ends the stream with an error (its chunks are gone) rather than mixing two videos.
 */
export function videoStream(ctx: Pick<ServiceContext, 'db'>, v: VideoInfo): Readable {
  const db = vdb(ctx);
  let seq = 0;
  return new Readable({
    highWaterMark: CHUNK_BYTES,
    read() {
      if (seq >= v.chunks) {
        this.push(null);
        return;
      }
      const at = seq++;
      db.selectFrom('video_chunks')
        .select('data')
        .where('video_id', '=', v.id)
        .where('seq', '=', at)
        .executeTakeFirst()
        .then(
          (row) => {
            if (!row) this.destroy(new Error('the video was replaced while it was being read'));
            else this.push(Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data as Uint8Array));
          },
          (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
        );
    },
  });
}

/**
 * A user merged into another (src/directory/merge.ts): the reference video goes with the other
 * sign-in credentials to the target when the target has none, and is deleted otherwise (a
 * disabled, merged user vouches for nothing). Idempotent.
 */
export async function moveReferenceVideo(ctx: Pick<ServiceContext, 'db'>, fromId: string, toId: string) {
  const from = referenceOwner(fromId);
  if (await videoInfo(ctx, referenceOwner(toId))) return deleteVideos(ctx, from);
  await vdb(ctx)
    .updateTable('videos')
    .set({ owner: referenceOwner(toId) })
    .where('owner', '=', from)
    .execute();
}

/** Deletes the owner's videos (complete or not). */
export async function deleteVideos(ctx: Pick<ServiceContext, 'db'>, owner: string): Promise<void> {
  const db = vdb(ctx);
  const rows = await db.selectFrom('videos').select('id').where('owner', '=', owner).execute();
  for (const r of rows) await dropVideo(db, r.id);
}

/** Up to `limit` distinct owners of complete videos after `after`, in order (the owner sweep's pages). */
export async function videoOwners(ctx: Pick<ServiceContext, 'db'>, after: string, limit: number) {
  const rows = await vdb(ctx)
    .selectFrom('videos')
    .select('owner')
    .distinct()
    .where('complete', '=', 1)
    .where('owner', '>', after)
    .orderBy('owner')
    .limit(limit)
    .execute();
  return rows.map((r) => r.owner);
}

/**
 * Deletes the owner's complete videos; how many. An upload under way is left alone: deleting its
 * row under it would leave its later chunks behind; it ends, or the abandoned-upload sweep takes it.
 */
export async function deleteCompleteVideos(ctx: Pick<ServiceContext, 'db'>, owner: string): Promise<number> {
  const db = vdb(ctx);
  const rows = await db
    .selectFrom('videos')
    .select('id')
    .where('owner', '=', owner)
    .where('complete', '=', 1)
    .execute();
  for (const r of rows) await dropVideo(db, r.id);
  return rows.length;
}

async function sweepAbandoned(db: Kysely<Tables>) {
  const rows = await db
    .selectFrom('videos')
    .select('id')
    .where('complete', '=', 0)
    .where('create_time', '<', Date.now() - ABANDONED_MS)
    .limit(16)
    .execute();
  for (const r of rows) await dropVideo(db, r.id);
}
