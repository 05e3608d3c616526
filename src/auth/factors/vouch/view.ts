import type { FastifyReply } from 'fastify';
import { User } from '../../../objects/user.js';
import type { Doc } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import { LEVEL_NAMES } from '../../integrity.js';
import { videoInfo, vouchOwner } from './videos.js';

/** A person as a request names them: ID, e-mail address and full name. */
async function person(ctx: ServiceContext, id: string) {
  const u = await ctx.store.get(User, id);
  const name = (u?.doc.Name as { FullName?: string } | undefined)?.FullName ?? '';
  return { ID: id, Email: String(u?.doc.Email ?? ''), FullName: name };
}

/** The JSON every vouch endpoint answers with (docs/signin.md, "Vouching"). */
export async function vouchView(ctx: ServiceContext, doc: Doc) {
  const id = String(doc.ID);
  const video = doc.State === 'pending' ? await videoInfo(ctx, vouchOwner(id)) : undefined;
  return {
    ID: id,
    State: doc.State,
    User: await person(ctx, String(doc.UserID)),
    Reason: doc.Reason,
    Level: doc.Level,
    LevelName: LEVEL_NAMES[Number(doc.Level)] ?? '',
    MagicWords: doc.MagicWords,
    ExpireTime: doc.ExpireTime,
    HaveVideo: doc.HaveVideo,
    VideoID: video?.id ?? '',
    GroupID: doc.GroupID,
    Vouchers: await Promise.all(((doc.Vouchers as string[]) ?? []).map((v) => person(ctx, v))),
    VoucherID: doc.VoucherID,
    DecideTime: doc.DecideTime,
    VouchURL: `/signin/vouch/${id}`,
  };
}

/** Answers with the request as vouchView shows it (never cached: it holds the magic words). */
export async function answer(reply: FastifyReply, ctx: ServiceContext, doc: Doc) {
  reply.header('Cache-Control', 'no-store');
  return reply.code(200).send(await vouchView(ctx, doc));
}
