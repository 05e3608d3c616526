import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { err, type RouteSchema } from '../../../core/routeschema.js';
import { User } from '../../../objects/user.js';
import { decide } from '../../../policy/decide.js';
import type { ServiceContext } from '../../../store/service.js';
import { credentialChange, credentialChanged } from '../stepup.js';
import {
  deleteVideos,
  referenceOwner,
  saveVideo,
  VIDEO_LIMIT,
  type VideoInfo,
  videoInfo,
  videoStream,
} from './videos.js';
import { parseMagicWords } from './words.js';

export const VIDEO_TYPE = 'video/webm';

/**
 * A reference video is a credential: it is what vouchers compare a new recording with. So
 * (docs/signin.md, "Reference videos"):
 * - GET /users/:id/reference-video: the user themself (session or own key) or an administrator;
 *   anyone else gets 404, as when there is none (whose videos exist is not told);
 * - PUT and DELETE: the step-up rule of every credential change (credentialChange, stepup.ts):
 *   the user's own session at the level their factors reach, an administrator's session at
 *   IntegrityAdmin, or the admin key's reset; never a plain key. Replacing ends the user's other
 *   sessions, an administrator's change ends all of them, as for any credential.
 */
export function registerReferenceVideo(app: FastifyInstance, ctx: ServiceContext) {
  // WebM bodies are read by the handler as a stream, never parsed or buffered whole.
  if (!app.hasContentTypeParser(VIDEO_TYPE))
    app.addContentTypeParser(VIDEO_TYPE, (_req, payload, done) => done(null, payload));

  const userParam = async (req: FastifyRequest) => {
    const id = String((req.params as { id: string }).id);
    if (!(await ctx.store.get(User, id))) throw new ApiError('NotFound', `User ${id} does not exist`);
    return id;
  };

  app.get('/users/:id/reference-video', { schema: GET_USERS_ID_REFERENCE_VIDEO }, async (req, reply) => {
    const p = req.principal;
    const id = String((req.params as { id: string }).id);
    const d = p && (await decide(ctx, p, 'User.reference-video', { kind: 'User', id, userId: id }));
    if (!d?.Allowed)
      throw new ApiError('NotFound', 'no reference video', { rule: d ? d.Rule : 'grant.scope' });
    await userParam(req);
    const v = await videoInfo(ctx, referenceOwner(id));
    if (!v) throw new ApiError('NotFound', 'this user has no reference video');
    return sendVideo(reply, ctx, v);
  });

  app.put('/users/:id/reference-video', { schema: PUT_USERS_ID_REFERENCE_VIDEO }, async (req, reply) => {
    const id = String((req.params as { id: string }).id);
    const change = await credentialChange(req, ctx, 'reference-video', 'set', id);
    const words = parseMagicWords(req.headers['x-magic-words']);
    if (typeof words === 'string') throw new ApiError('InvalidField', words, { field: 'X-Magic-Words' });
    const had = (await videoInfo(ctx, referenceOwner(id))) !== undefined;
    const { body, length } = videoBody(req);
    await saveVideo(ctx, referenceOwner(id), words, body, length);
    await credentialChanged(
      req,
      reply,
      ctx,
      { ...change, existing: change.existing || had },
      'reference-video',
    );
    return reply.code(204).send();
  });

  app.delete(
    '/users/:id/reference-video',
    { schema: DELETE_USERS_ID_REFERENCE_VIDEO },
    async (req, reply) => {
      const id = String((req.params as { id: string }).id);
      const change = await credentialChange(req, ctx, 'reference-video', 'remove', id);
      if (!(await videoInfo(ctx, referenceOwner(id))))
        throw new ApiError('NotFound', 'this user has no reference video');
      await deleteVideos(ctx, referenceOwner(id));
      await credentialChanged(req, reply, ctx, change, 'reference-video');
      return reply.code(204).send();
    },
  );
}

/** The request's WebM body as a stream, and its declared length; 415 for any other type. */
export function videoBody(req: FastifyRequest): { body: Readable; length: number | undefined } {
  const type = String(req.headers['content-type'] ?? '')
    .split(';')[0]
    ?.trim()
    .toLowerCase();
  const body = req.body as Readable | undefined;
  if (type !== VIDEO_TYPE || !body || typeof (body as { pipe?: unknown }).pipe !== 'function')
    throw new ApiError('UnsupportedMediaType', `send the video as ${VIDEO_TYPE}`, { field: 'Content-Type' });
  const raw = req.headers['content-length'];
  const length = raw === undefined ? undefined : Number(raw);
  return { body, length: length !== undefined && Number.isFinite(length) ? length : undefined };
}

/** Streams a stored video: video/webm, its length, X-Magic-Words; never cached or sniffed. */
export function sendVideo(reply: FastifyReply, ctx: ServiceContext, v: VideoInfo) {
  reply.header('Content-Type', VIDEO_TYPE);
  reply.header('Content-Length', String(v.size));
  reply.header('X-Magic-Words', v.words.join(','));
  reply.header('Cache-Control', 'private, no-store');
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('Content-Security-Policy', "default-src 'none'; sandbox");
  reply.header('Content-Disposition', 'inline; filename="video.webm"');
  return reply.code(200).send(videoStream(ctx, v));
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const GET_USERS_ID_REFERENCE_VIDEO: RouteSchema = {
  tags: ['Vouching'],
  summary: 'The user’s reference video (the user themself or administrators)',
  params: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  response: {
    '200': {
      description: 'The WebM video, streamed',
      headers: {
        'X-Magic-Words': { schema: { type: 'string' }, description: 'Comma-separated words said in it' },
      },
      content: { 'video/webm': { schema: { type: 'string', format: 'binary' } } },
    },
    '404': err('No such user, no video, or not the caller’s to see'),
  },
};

const PUT_USERS_ID_REFERENCE_VIDEO: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Set or replace the reference video (a credential change: step-up)',
  params: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  headers: {
    type: 'object',
    properties: { 'X-Magic-Words': { type: 'string' } },
    required: ['X-Magic-Words'],
  },
  body: {
    required: true,
    content: { 'video/webm': { schema: { type: 'string', format: 'binary', maxLength: VIDEO_LIMIT } } },
  },
  response: {
    '204': { description: 'Stored' },
    '400': err('Missing or malformed X-Magic-Words; empty body'),
    '401': err('The session must step up (Intent)'),
    '403': err('An API key that is not an administrator’s reset; another user’s session'),
    '404': err('No such user'),
    '413': err(`Larger than ${VIDEO_LIMIT} bytes`),
    '415': err('Not video/webm, or the bytes are not WebM'),
  },
  // handler: the body is a stream checked as it arrives; a missing X-Magic-Words is answered after
  // the step-up (401) and the caller's right (403), which a required header would pre-empt.
  validatedBy: 'handler',
};

const DELETE_USERS_ID_REFERENCE_VIDEO: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Remove the reference video (a credential change: step-up)',
  params: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  response: {
    '204': { description: 'Removed' },
    '401': err('The session must step up (Intent)'),
    '403': err('Not allowed to change this user’s credentials'),
    '404': err('No such user, or no video'),
  },
};
