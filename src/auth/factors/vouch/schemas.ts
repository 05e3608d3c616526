import { err, formBody, type Json, pathParams, type RouteSchema, ref } from '../../../core/routeschema.js';
import { Level } from '../../integrity.js';
import { VIDEO_LIMIT } from './videos.js';

/** Vouching lends a person's word: it never reaches the hardware-backed level (a limit its requests state). */
export const MAX_VOUCH_LEVEL = Level.TwoFactors;

/** The route schemas of this factor's endpoints: what Fastify checks and /openapi.json describes (src/api/openapi.ts). */
export const POST_AUTH_VOUCH: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Create a vouch request for the session’s user',
  security: [{ session: [] }],
  body: {
    required: false,
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: {
            intent: { type: 'string', description: 'Signed intent; its level is the level asked for' },
            voucher: {
              type: 'array',
              items: { type: 'string' },
              description: 'User IDs or e-mail addresses of eligible vouchers (default: all eligible)',
            },
            group: { type: 'string', description: 'Only vouchers eligible through this group' },
            reason: { type: 'string', maxLength: 1024 },
            email: { type: 'string', description: 'The e-mail step folded in' },
          },
          required: [],
        },
      },
    },
  },
  response: {
    '200': {
      description: 'The request (State pending), its magic words and vouchers',
      content: { 'application/json': { schema: ref('VouchView') } },
    },
    '400': err(`No user named yet; bad field or intent; an intent above level ${MAX_VOUCH_LEVEL}`),
    '403': err('A named voucher is not eligible'),
    '409': err('No reference video; nobody may vouch; too many pending requests'),
    '429': err('Too many requests (X-Next-Attempt)'),
  },
  // handler: the user is named (400 No user named yet, 429 throttled) before the fields are read.
  validatedBy: 'handler',
};

export const GET_AUTH_VOUCH_ID: RouteSchema = {
  tags: ['Vouching'],
  summary: 'The state of a vouch request (its session, its vouchers, administrators)',
  security: [{ session: [] }],
  params: pathParams('id'),
  response: {
    '200': { description: 'The request', content: { 'application/json': { schema: ref('VouchView') } } },
    '404': err('No such request, or not for this caller'),
  },
};

export const DELETE_AUTH_VOUCH_ID: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Cancel a pending vouch request (the session that made it)',
  security: [{ session: [] }],
  params: pathParams('id'),
  response: {
    '200': {
      description: 'The request, State cancelled',
      content: { 'application/json': { schema: ref('VouchView') } },
    },
    '403': err('Not the requesting session'),
    '404': err('No such request'),
    '409': err('Not pending (Invalid Transition)'),
  },
};

export const POST_AUTH_VOUCH_ID_VIDEO: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Supply (or replace) the recording of the magic words',
  security: [{ session: [] }],
  params: pathParams('id'),
  body: {
    required: true,
    content: { 'video/webm': { schema: { type: 'string', format: 'binary', maxLength: VIDEO_LIMIT } } },
  },
  response: {
    '204': { description: 'Stored' },
    '400': err('Empty body'),
    '403': err('Not the requesting session'),
    '404': err('No such request'),
    '409': err('Not pending'),
    '413': err(`Larger than ${VIDEO_LIMIT} bytes`),
    '415': err('Not video/webm, or the bytes are not WebM'),
  },
  // handler: the body is a stream, checked as it arrives (size, WebM magic), not a parsed value.
  validatedBy: 'handler',
};

export const POST_AUTH_VOUCH_ID_APPROVE: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Vouch: raises the requesting session to the request’s Level',
  security: [{ session: [] }],
  params: pathParams('id'),
  body: formBody({ video: { type: 'string', description: 'VideoID of the recording watched' } }, ['video']),
  response: {
    '200': {
      description: 'The request, State approved',
      content: { 'application/json': { schema: ref('VouchView') } },
    },
    '401': err('Not signed in, or proven level below the request’s Level (Intent to step up)'),
    '403': err('The requester themself, or a user who may not sign in'),
    '404': err('No such request, or not a voucher of it'),
    '409': err('Not pending, no video yet, the video changed, or the requester’s session ended'),
  },
};

export const POST_AUTH_VOUCH_ID_DECLINE: RouteSchema = {
  tags: ['Vouching'],
  summary: 'Decline to vouch',
  security: [{ session: [] }],
  params: pathParams('id'),
  response: {
    '200': {
      description: 'The request, State rejected',
      content: { 'application/json': { schema: ref('VouchView') } },
    },
    '401': err('Not signed in'),
    '403': err('The requester themself'),
    '404': err('No such request, or not a voucher of it'),
    '409': err('Not pending'),
  },
};
/** A recording of a vouch request: the WebM stream and the words said in it. */
const videoSchema = (summary: string): RouteSchema => ({
  tags: ['Vouching'],
  summary,
  security: [{ session: [] }],
  params: pathParams('id'),
  response: {
    '200': {
      description: 'The WebM video, streamed',
      headers: {
        'X-Magic-Words': { schema: { type: 'string' }, description: 'Comma-separated words said in it' },
      },
      content: { 'video/webm': { schema: { type: 'string', format: 'binary' } } },
    },
    '404': err('None, or not for this caller'),
  },
});
export const VIDEO_SCHEMAS: Record<'video' | 'reference-video', RouteSchema> = {
  video: videoSchema('The recording, for vouchers and administrators while pending'),
  'reference-video': videoSchema(
    'The requester’s reference video, for vouchers and administrators while pending',
  ),
};
const person = {
  type: 'object',
  properties: { ID: { type: 'string' }, Email: { type: 'string' }, FullName: { type: 'string' } },
};

/** The named schemas the vouch endpoints answer with (components.schemas of /openapi.json). */
export const VOUCH_SCHEMAS: Record<string, Json> = {
  VouchView: {
    type: 'object',
    description: 'What the vouch endpoints answer with',
    properties: {
      ID: { type: 'string' },
      State: { type: 'string', enum: ['pending', 'approved', 'rejected', 'cancelled', 'expired'] },
      User: person,
      Reason: { type: 'string' },
      Level: { type: 'integer' },
      LevelName: { type: 'string' },
      MagicWords: { type: 'array', items: { type: 'string' } },
      ExpireTime: { type: 'string', format: 'date-time' },
      HaveVideo: { type: 'boolean' },
      VideoID: { type: 'string', description: 'The current recording ("" when none or decided)' },
      GroupID: { type: 'string' },
      Vouchers: { type: 'array', items: person },
      VoucherID: { type: 'string' },
      DecideTime: { type: 'string', format: 'date-time' },
      VouchURL: { type: 'string', description: 'The voucher’s page' },
    },
  },
};
