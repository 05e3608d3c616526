import { MAX_VOUCH_LEVEL } from '../auth/factors/vouch/index.js';
import { VIDEO_LIMIT } from '../auth/factors/vouch/videos.js';

/** OpenAPI paths and schemas of vouching and reference videos (docs/signin.md, "Vouching"). */
type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const err = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('Error') } },
});
const view = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('VouchView') } },
});
const id = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const form = (properties: Json, required: string[] = []) => ({
  required: required.length > 0,
  content: {
    'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } },
  },
});
const webm = {
  required: true,
  content: { 'video/webm': { schema: { type: 'string', format: 'binary', maxLength: VIDEO_LIMIT } } },
};
const video = {
  description: 'The WebM video, streamed',
  headers: {
    'X-Magic-Words': { schema: { type: 'string' }, description: 'Comma-separated words said in it' },
  },
  content: { 'video/webm': { schema: { type: 'string', format: 'binary' } } },
};
const tags = ['Vouching'];
const session = [{ session: [] }];

export const VOUCH_PATHS: Record<string, Json> = {
  '/auth/vouch': {
    post: {
      tags,
      security: session,
      summary: 'Create a vouch request for the session’s user',
      requestBody: form({
        intent: { type: 'string', description: 'Signed intent; its level is the level asked for' },
        voucher: {
          type: 'array',
          items: { type: 'string' },
          description: 'User IDs or e-mail addresses of eligible vouchers (default: all eligible)',
        },
        group: { type: 'string', description: 'Only vouchers eligible through this group' },
        reason: { type: 'string', maxLength: 1024 },
        email: { type: 'string', description: 'The e-mail step folded in' },
      }),
      responses: {
        200: view('The request (State pending), its magic words and vouchers'),
        400: err(`No user named yet; bad field or intent; an intent above level ${MAX_VOUCH_LEVEL}`),
        403: err('A named voucher is not eligible'),
        409: err('No reference video; nobody may vouch; too many pending requests'),
        429: err('Too many requests (X-Next-Attempt)'),
      },
    },
  },
  '/auth/vouch/{id}': {
    parameters: [id],
    get: {
      tags,
      security: session,
      summary: 'The state of a vouch request (its session, its vouchers, administrators)',
      responses: { 200: view('The request'), 404: err('No such request, or not for this caller') },
    },
    delete: {
      tags,
      security: session,
      summary: 'Cancel a pending vouch request (the session that made it)',
      responses: {
        200: view('The request, State cancelled'),
        403: err('Not the requesting session'),
        404: err('No such request'),
        409: err('Not pending (Invalid Transition)'),
      },
    },
  },
  '/auth/vouch/{id}/video': {
    parameters: [id],
    post: {
      tags,
      security: session,
      summary: 'Supply (or replace) the recording of the magic words',
      requestBody: webm,
      responses: {
        204: { description: 'Stored' },
        400: err('Empty body'),
        403: err('Not the requesting session'),
        404: err('No such request'),
        409: err('Not pending'),
        413: err(`Larger than ${VIDEO_LIMIT} bytes`),
        415: err('Not video/webm, or the bytes are not WebM'),
      },
    },
    get: {
      tags,
      security: session,
      summary: 'The recording, for vouchers and administrators while pending',
      responses: { 200: video, 404: err('None, or not for this caller') },
    },
  },
  '/auth/vouch/{id}/reference-video': {
    parameters: [id],
    get: {
      tags,
      security: session,
      summary: 'The requester’s reference video, for vouchers and administrators while pending',
      responses: { 200: video, 404: err('None, or not for this caller') },
    },
  },
  '/auth/vouch/{id}/approve': {
    parameters: [id],
    post: {
      tags,
      security: session,
      summary: 'Vouch: raises the requesting session to the request’s Level',
      requestBody: form({ video: { type: 'string', description: 'VideoID of the recording watched' } }, [
        'video',
      ]),
      responses: {
        200: view('The request, State approved'),
        401: err('Not signed in, or proven level below the request’s Level (Intent to step up)'),
        403: err('The requester themself, or a user who may not sign in'),
        404: err('No such request, or not a voucher of it'),
        409: err('Not pending, no video yet, the video changed, or the requester’s session ended'),
      },
    },
  },
  '/auth/vouch/{id}/decline': {
    parameters: [id],
    post: {
      tags,
      security: session,
      summary: 'Decline to vouch',
      responses: {
        200: view('The request, State rejected'),
        401: err('Not signed in'),
        403: err('The requester themself'),
        404: err('No such request, or not a voucher of it'),
        409: err('Not pending'),
      },
    },
  },
  '/users/{id}/reference-video': {
    parameters: [id],
    get: {
      tags,
      summary: 'The user’s reference video (the user themself or administrators)',
      responses: { 200: video, 404: err('No such user, no video, or not the caller’s to see') },
    },
    put: {
      tags,
      summary: 'Set or replace the reference video (a credential change: step-up)',
      parameters: [{ name: 'X-Magic-Words', in: 'header', required: true, schema: { type: 'string' } }],
      requestBody: webm,
      responses: {
        204: { description: 'Stored' },
        400: err('Missing or malformed X-Magic-Words; empty body'),
        401: err('The session must step up (Intent)'),
        403: err('An API key that is not an administrator’s reset; another user’s session'),
        404: err('No such user'),
        413: err(`Larger than ${VIDEO_LIMIT} bytes`),
        415: err('Not video/webm, or the bytes are not WebM'),
      },
    },
    delete: {
      tags,
      summary: 'Remove the reference video (a credential change: step-up)',
      responses: {
        204: { description: 'Removed' },
        401: err('The session must step up (Intent)'),
        403: err('Not allowed to change this user’s credentials'),
        404: err('No such user, or no video'),
      },
    },
  },
};

const person = {
  type: 'object',
  properties: { ID: { type: 'string' }, Email: { type: 'string' }, FullName: { type: 'string' } },
};

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
