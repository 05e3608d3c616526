import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { User } from '../../../objects/user.js';
import { VouchRequest } from '../../../objects/vouchrequest.js';
import { decide } from '../../../policy/decide.js';
import type { Doc } from '../../../schema/fields.js';
import { findWhere } from '../../../store/find.js';
import { newId } from '../../../store/objects.js';
import type { ServiceContext } from '../../../store/service.js';
import { userUsable } from '../../apikeys.js';
import { LEVEL_NAMES, Level, provenLevel } from '../../integrity.js';
import { type RateLimit, takeRequest } from '../../ratelimit.js';
import { insufficientIntegrity } from '../../session/authenticator.js';
import { completeSignIn } from '../../session/complete.js';
import { mutateSession, requestSession, type Session, sessionById } from '../../session/sessions.js';
import { type Factor, FLOW, field, formIntent, formOf, identified } from '../factor.js';
import { reachableLevel } from '../stepup.js';
import {
  currentRequest,
  eligibleVouchers,
  MAX_PENDING,
  stamp,
  transition,
  VOUCH_TTL_MS,
} from './lifecycle.js';
import { registerReferenceVideo, sendVideo, videoBody } from './reference.js';
import {
  DELETE_AUTH_VOUCH_ID,
  GET_AUTH_VOUCH_ID,
  MAX_VOUCH_LEVEL,
  POST_AUTH_VOUCH,
  POST_AUTH_VOUCH_ID_APPROVE,
  POST_AUTH_VOUCH_ID_DECLINE,
  POST_AUTH_VOUCH_ID_VIDEO,
  VIDEO_SCHEMAS,
  VOUCH_SCHEMAS,
} from './schemas.js';
import { scheduleVideoSweep } from './sweep.js';
import { deleteVideos, referenceOwner, saveVideo, videoInfo, vouchOwner } from './videos.js';
import { answer } from './view.js';
import { magicWords } from './words.js';

/**
 * Vouching (docs/signin.md, "Vouching"): a user who cannot prove enough (lost phone, forgotten
 * password) asks colleagues or approvers to vouch for them. The request names who may vouch, the
 * requester records a video saying the request's magic words, and a voucher who watched it beside
 * the user's reference video approves or declines. Approval raises the requesting session to the
 * request's level, never above what the voucher has proven.
 *
 * Endpoints: POST /auth/vouch, GET and DELETE /auth/vouch/:id, POST /auth/vouch/:id/video (the
 * spec's); GET /auth/vouch/:id/video and /reference-video, POST /auth/vouch/:id/approve and
 * /decline (for vouchers); GET/PUT/DELETE /users/:id/reference-video (./reference.ts).
 */

/** New requests per user: 5 at once, then one every 5 minutes (each one asks colleagues). */
export const VOUCH_PER_USER: RateLimit = { name: 'vouch-user', burst: 5, intervalMs: 5 * 60_000 };
/** New requests per client address. */
export const VOUCH_PER_ADDRESS: RateLimit = { name: 'vouch-address', burst: 10, intervalMs: 60_000 };

const param = (req: FastifyRequest) => String((req.params as { id: string }).id);

type Viewer =
  | { role: 'requester'; session: Session }
  | { role: 'voucher'; session: Session }
  | { role: 'admin' };

/**
 * Who is looking at a request: the session that made it, a voucher named in it (signed in, with
 * at least one proven factor), or an administrator (admin key or session). Anyone else gets 404,
 * as for a request that does not exist: requests, their words and videos are not listed to others.
 */
async function viewerOf(req: FastifyRequest, ctx: ServiceContext, doc: Doc, secret: Doc): Promise<Viewer> {
  const { session } = await requestSession(req, ctx);
  if (session && session.id === secret.SessionID && session.userId === doc.UserID)
    return { role: 'requester', session };
  if (
    session &&
    session.userId !== '' &&
    session.userId !== doc.UserID &&
    ((doc.Vouchers as string[]) ?? []).includes(session.userId) &&
    provenLevel(session) >= Level.OneFactor
  )
    return { role: 'voucher', session };
  const p = req.principal;
  if (
    p &&
    (await decide(ctx, p, 'VouchRequest.administer', { kind: 'VouchRequest', id: String(doc.ID) })).Allowed
  )
    return { role: 'admin' };
  throw new ApiError('NotFound', `VouchRequest ${doc.ID} does not exist`);
}

async function load(req: FastifyRequest, ctx: ServiceContext) {
  const id = param(req);
  const obj = await currentRequest(ctx, id);
  if (!obj) throw new ApiError('NotFound', `VouchRequest ${id} does not exist`);
  const secret = await ctx.store.getSecret(VouchRequest, id);
  return { obj, secret, viewer: await viewerOf(req, ctx, obj.doc, secret) };
}

/** Resolves the form's `voucher` values (user IDs or e-mail addresses) to user IDs. */
async function namedVouchers(ctx: ServiceContext, form: Record<string, string | string[]>) {
  const raw = form.voucher;
  const list = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  if (list.length > 16) throw new ApiError('InvalidField', 'at most 16 vouchers', { field: 'voucher' });
  const out: string[] = [];
  for (const v of list) {
    if (v.length > 254) throw new ApiError('InvalidField', 'voucher is too long', { field: 'voucher' });
    const byId = await ctx.store.get(User, v);
    const u = byId ?? (await ctx.store.findByKey(User, 'Email', v.trim().toLowerCase()));
    out.push(u ? u.id : `?${v}`);
  }
  return out;
}

/** The request a voucher decides on (voucherCheck says whether this caller may). */
async function decidable(req: FastifyRequest, ctx: ServiceContext) {
  const id = param(req);
  const obj = await currentRequest(ctx, id);
  if (!obj) throw new ApiError('NotFound', `VouchRequest ${id} does not exist`);
  return obj;
}

/**
 * The voucher's checks before a decision; returns the voucher's session. A session (API keys are
 * not people watching a video) of a usable user other than the requester (403), named in the
 * request and still eligible now (else 404, as for a request they may not see).
 */
async function voucherCheck(req: FastifyRequest, ctx: ServiceContext, doc: Doc): Promise<Session> {
  const { session } = await requestSession(req, ctx);
  if (!session || session.userId === '')
    throw new ApiError('Unauthenticated', 'sign in to vouch for someone');
  if (session.userId === doc.UserID) throw new ApiError('Forbidden', 'nobody may vouch for themselves');
  const me = await ctx.store.get(User, session.userId);
  if (!me || !userUsable(me.doc)) throw new ApiError('Forbidden', 'this user may not vouch');
  // Still eligible now (memberships may have changed since the request was made).
  const eligible = await eligibleVouchers(ctx, String(doc.UserID));
  if (!((doc.Vouchers as string[]) ?? []).includes(session.userId) || !eligible.has(session.userId))
    throw new ApiError('NotFound', `VouchRequest ${doc.ID} does not exist`);
  return session;
}

export const vouchFactor: Factor = {
  name: 'vouch',
  words: { label: 'a colleague vouching for you', proof: 'a colleague vouching for you' },
  schemas: VOUCH_SCHEMAS,
  register(app, ctx) {
    registerReferenceVideo(app, ctx);
    scheduleVideoSweep(ctx);

    app.post('/auth/vouch', { ...FLOW, schema: POST_AUTH_VOUCH }, (req, reply) =>
      createRequest(req, reply, ctx),
    );

    app.get('/auth/vouch/:id', { ...FLOW, schema: GET_AUTH_VOUCH_ID }, async (req, reply) => {
      const { obj } = await load(req, ctx);
      return answer(reply, ctx, obj.doc);
    });

    app.delete('/auth/vouch/:id', { ...FLOW, schema: DELETE_AUTH_VOUCH_ID }, async (req, reply) => {
      const { obj, viewer } = await load(req, ctx);
      if (viewer.role !== 'requester')
        throw new ApiError('Forbidden', 'only the session that made the request may cancel it');
      const doc = await transition(ctx, obj.id, 'cancel', 'requester');
      await deleteVideos(ctx, vouchOwner(obj.id));
      return answer(reply, ctx, doc);
    });

    app.post('/auth/vouch/:id/video', { ...FLOW, schema: POST_AUTH_VOUCH_ID_VIDEO }, async (req, reply) => {
      const { obj, viewer } = await load(req, ctx);
      if (viewer.role !== 'requester')
        throw new ApiError('Forbidden', 'only the session that made the request may supply its video');
      if (obj.doc.State !== 'pending')
        throw new ApiError('InvalidTransition', `a vouch request that is ${obj.doc.State} takes no video`);
      const { body, length } = videoBody(req);
      await saveVideo(ctx, vouchOwner(obj.id), obj.doc.MagicWords as string[], body, length);
      try {
        await transition(ctx, obj.id, 'video', 'requester', { extra: () => ({ HaveVideo: true }) });
      } catch (e) {
        await deleteVideos(ctx, vouchOwner(obj.id));
        throw e;
      }
      return reply.code(204).send();
    });

    for (const which of ['video', 'reference-video'] as const)
      app.get(`/auth/vouch/:id/${which}`, { ...FLOW, schema: VIDEO_SCHEMAS[which] }, async (req, reply) => {
        const { obj, viewer } = await load(req, ctx);
        if (viewer.role === 'requester')
          throw new ApiError('NotFound', 'the videos of a request are shown to its vouchers only');
        if (viewer.role === 'voucher') await voucherCheck(req, ctx, obj.doc);
        const owner = which === 'video' ? vouchOwner(obj.id) : referenceOwner(String(obj.doc.UserID));
        const v = obj.doc.State === 'pending' ? await videoInfo(ctx, owner) : undefined;
        if (!v)
          throw new ApiError(
            'NotFound',
            `there is no ${which === 'video' ? 'recording' : 'reference video'}`,
          );
        return sendVideo(reply, ctx, v);
      });

    app.post('/auth/vouch/:id/approve', { ...FLOW, schema: POST_AUTH_VOUCH_ID_APPROVE }, (req, reply) =>
      approveRequest(req, reply, ctx),
    );

    app.post(
      '/auth/vouch/:id/decline',
      { ...FLOW, schema: POST_AUTH_VOUCH_ID_DECLINE },
      async (req, reply) => {
        formOf(req);
        const obj = await decidable(req, ctx);
        const voucher = await voucherCheck(req, ctx, obj.doc);
        const doc = await transition(ctx, obj.id, 'decline', 'voucher', {
          extra: () => ({ VoucherID: voucher.userId }),
        });
        await deleteVideos(ctx, vouchOwner(obj.id));
        req.log.info(
          { vouchRequest: obj.id, requester: obj.doc.UserID, voucher: voucher.userId },
          'vouch declined',
        );
        return answer(reply, ctx, doc);
      },
    );
  },
};

/**
 * POST /auth/vouch/:id/approve: a voucher who watched the current video raises the requester's
 * session to the request's level (never above what the voucher has proven).
 */
async function approveRequest(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const form = formOf(req);
  const seen = field(form, 'video', { required: true, max: 64 });
  const obj = await decidable(req, ctx);
  const voucher = await voucherCheck(req, ctx, obj.doc);
  const level = Number(obj.doc.Level);
  // Nobody raises a session above what they have proven themselves.
  if (provenLevel(voucher) < level)
    throw await insufficientIntegrity(
      req,
      ctx,
      level,
      `vouching for level ${level} needs this session to have proven level ${level} itself`,
    );
  const secret = await ctx.store.getSecret(VouchRequest, obj.id);
  const target = typeof secret.SessionID === 'string' ? await sessionById(ctx, secret.SessionID) : undefined;
  if (!target || target.userId !== obj.doc.UserID)
    throw new ApiError('SessionConflict', "the requester's session has ended; they must ask again");
  // The one sign-in completion for the requester's session, before the request is approved.
  const checked = await completeSignIn(ctx, target, { factor: 'vouch', floor: { BoostLevel: level } });
  const current = await videoInfo(ctx, vouchOwner(obj.id));
  const doc = await transition(ctx, obj.id, 'approve', 'voucher', {
    check: (d) => {
      if (d.HaveVideo !== true || !current)
        throw new ApiError('Conflict', 'the requester has not supplied the video yet');
      if (current.id !== seen)
        throw new ApiError('Conflict', 'the video changed since you watched it: watch the new one', {
          field: 'video',
        });
    },
    extra: () => ({ VoucherID: voucher.userId }),
  });
  const raised = await mutateSession(
    ctx,
    target.id,
    (cur) => {
      if (cur.userId !== obj.doc.UserID) throw new ApiError('SessionConflict', 'the session changed user');
      return {
        ...cur,
        factors: cur.factors.includes('vouch') ? cur.factors : [...cur.factors, 'vouch'],
        data: {
          ...cur.data,
          ...checked,
          BoostLevel: Math.max(cur.data.BoostLevel ?? 0, level),
          RotatePending: true,
        },
      };
    },
    { rotate: false },
  );
  await deleteVideos(ctx, vouchOwner(obj.id));
  req.log.info(
    {
      vouchRequest: obj.id,
      requester: obj.doc.UserID,
      voucher: voucher.userId,
      level,
      raised: !!raised,
    },
    'vouch approved',
  );
  if (!raised) throw new ApiError('SessionConflict', "the requester's session ended while being raised");
  return answer(reply, ctx, doc);
}

/** POST /auth/vouch: a new request, naming its vouchers and the level it would raise the session to. */
async function createRequest(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const form = formOf(req);
  const who = await identified(req, reply, ctx, form);
  const intent = await formIntent(ctx, form, who.session);
  const reason = field(form, 'reason', { max: 1024 }) ?? '';
  const groupId = field(form, 'group', { max: 64 }) ?? '';
  const userId = who.user.id;
  const level = intent
    ? Math.max(intent.lvl, Level.OneFactor)
    : Math.max(
        Level.OneFactor,
        Math.min(MAX_VOUCH_LEVEL, await reachableLevel(ctx, who.user.doc, who.secret)),
      );
  if (level > MAX_VOUCH_LEVEL)
    throw new ApiError(
      'BadRequest',
      `vouching raises a session to at most level ${MAX_VOUCH_LEVEL} (${LEVEL_NAMES[MAX_VOUCH_LEVEL]}); the intent needs ${level}`,
      { field: 'intent' },
    );
  if (!(await videoInfo(ctx, referenceOwner(userId))))
    throw new ApiError(
      'Conflict',
      'this user has no reference video, so nobody could compare a recording with it: vouching is not available',
    );
  const eligible = await eligibleVouchers(ctx, userId);
  const named = await namedVouchers(ctx, form);
  for (const n of named)
    if (!eligible.has(n))
      throw new ApiError('Forbidden', 'a voucher named is not a colleague or approver of this user', {
        field: 'voucher',
      });
  let vouchers = named.length > 0 ? named : [...eligible.keys()];
  if (groupId !== '') vouchers = vouchers.filter((v) => eligible.get(v)?.has(groupId));
  vouchers = [...new Set(vouchers)].slice(0, 64);
  if (vouchers.length === 0)
    throw new ApiError(
      'Conflict',
      groupId !== ''
        ? 'nobody in that group may vouch for this user'
        : 'nobody may vouch for this user: vouchers are colleagues in groups that need approval, and approvers',
      { field: groupId !== '' ? 'group' : 'voucher' },
    );
  // A new request from the same session replaces its pending one; a user has few at once.
  let pending = 0;
  for (const d of (await findWhere(ctx.store, VouchRequest, { UserID: userId, State: 'pending' })).slice(
    0,
    100,
  )) {
    const sec = await ctx.store.getSecret(VouchRequest, String(d.ID));
    if (sec.SessionID === who.session.id) {
      await transition(ctx, String(d.ID), 'cancel', 'requester').catch(() => undefined);
      await deleteVideos(ctx, vouchOwner(String(d.ID)));
    } else if ((await currentRequest(ctx, String(d.ID)))?.doc.State === 'pending') pending++;
  }
  if (pending >= MAX_PENDING)
    throw new ApiError('Conflict', `this user has ${pending} pending vouch requests; cancel one first`);
  await takeRequest(ctx, VOUCH_PER_ADDRESS, req.ip);
  await takeRequest(ctx, VOUCH_PER_USER, `user:${userId}`);
  const id = newId();
  const doc: Doc = {
    UserID: userId,
    State: 'pending',
    Reason: reason,
    Vouchers: vouchers,
    GroupID: groupId,
    Level: level,
    MagicWords: magicWords(4),
    ExpireTime: stamp(Date.now() + VOUCH_TTL_MS),
    HaveVideo: false,
    VoucherID: '',
  };
  const stored = await ctx.store.systemPut(VouchRequest, id, () => ({
    doc,
    secret: { SessionID: who.session.id },
  }));
  return answer(reply, ctx, stored?.doc ?? doc);
}
