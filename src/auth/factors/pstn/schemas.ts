import { err, pathParams, type RouteSchema, USER_QUERY } from '../../../core/routeschema.js';

/** The route schemas of this factor's endpoints: what Fastify checks and /openapi.json describes (src/api/openapi.ts). */
export const GET_AUTH_PSTN: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: "The signing-in user's phones, numbers masked",
  security: [],
  response: {
    '200': {
      description: 'Phones',
      content: {
        'application/json': {
          schema: {
            type: 'array',
            items: {
              type: 'object',
              description: 'PSTNDevice',
              properties: {
                ID: { type: 'string' },
                Number: { type: 'string', description: 'E.164 (masked, ••••••67, on GET /auth/pstn)' },
                Mode: { type: 'string', enum: ['sms', 'voice'] },
                Verified: { type: 'boolean' },
                CreateTime: { type: 'string', format: 'date-time' },
              },
            },
          },
        },
      },
    },
    '400': err('No user named yet'),
  },
};

export const POST_AUTH_PSTN_ID_START: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: 'Sends a sign-in code by SMS or voice call, per the device',
  security: [],
  params: pathParams('id'),
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: { type: 'object', properties: { intent: { type: 'string' } }, required: [] },
      },
    },
  },
  response: {
    '204': { description: 'Sent' },
    '400': err('No user named yet; bad intent'),
    '404': err('Not a phone of this user'),
    '422': err('Device Not Verified'),
    '429': err('Too many attempts or messages (header X-Next-Attempt)'),
    '503': err('The provider did not accept the message'),
  },
};

export const POST_AUTH_PSTN_ID_FINISH: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: 'The code received; proves the phone in this session',
  security: [],
  params: pathParams('id'),
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: { intent: { type: 'string' }, code: { type: 'string' } },
          required: ['code'],
        },
      },
    },
  },
  response: {
    '204': { description: 'Proven' },
    '403': err('Code incorrect, used or expired'),
    '429': err('Too many attempts or messages (header X-Next-Attempt)'),
  },
};

export const DELETE_AUTH_PSTN_ID: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: 'Cancels the pending sign-in code',
  security: [],
  params: pathParams('id'),
  response: { '204': { description: 'Cancelled' } },
};

export const GET_AUTH_ENROLL_PSTN: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: "The user's phones",
  querystring: USER_QUERY,
  response: {
    '200': {
      description: 'Phones',
      content: {
        'application/json': {
          schema: {
            type: 'array',
            items: {
              type: 'object',
              description: 'PSTNDevice',
              properties: {
                ID: { type: 'string' },
                Number: { type: 'string', description: 'E.164 (masked, ••••••67, on GET /auth/pstn)' },
                Mode: { type: 'string', enum: ['sms', 'voice'] },
                Verified: { type: 'boolean' },
                CreateTime: { type: 'string', format: 'date-time' },
              },
            },
          },
        },
      },
    },
  },
};

export const POST_AUTH_ENROLL_PSTN: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: 'Adds a phone (unverified) and sends it a verification code (step-up)',
  querystring: USER_QUERY,
  body: {
    required: true,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          properties: { Number: { type: 'string' }, Mode: { type: 'string', enum: ['sms', 'voice'] } },
          required: ['Number'],
        },
      },
    },
  },
  response: {
    '201': {
      description: 'Added',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            description: 'PSTNDevice',
            properties: {
              ID: { type: 'string' },
              Number: { type: 'string', description: 'E.164 (masked, ••••••67, on GET /auth/pstn)' },
              Mode: { type: 'string', enum: ['sms', 'voice'] },
              Verified: { type: 'boolean' },
              CreateTime: { type: 'string', format: 'date-time' },
            },
          },
        },
      },
    },
    '400': err('Number not E.164, or Mode not sms/voice'),
    '401': err('Step-up needed (the body carries an intent)'),
    '403': err('An API key that is not an administrator’s reset'),
    '409': err('Number already added, or 5 phones already'),
    '429': err('Too many attempts or messages (header X-Next-Attempt)'),
    '503': err('The provider did not accept the message'),
  },
};

export const POST_AUTH_ENROLL_PSTN_ID_VERIFY: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: 'Verifies the number with the code sent to it (step-up)',
  params: pathParams('id'),
  querystring: USER_QUERY,
  body: {
    required: true,
    content: {
      'application/json': {
        schema: { type: 'object', properties: { Code: { type: 'string' } }, required: ['Code'] },
      },
    },
  },
  response: {
    '204': { description: 'Verified' },
    '401': err('Step-up needed (the body carries an intent)'),
    '403': err('Code incorrect'),
    '404': err('No such phone'),
    '429': err('Too many attempts or messages (header X-Next-Attempt)'),
  },
};

export const DELETE_AUTH_ENROLL_PSTN_ID: RouteSchema = {
  tags: ['Sign-in: phone'],
  summary: 'Removes a phone (step-up)',
  params: pathParams('id'),
  querystring: USER_QUERY,
  response: {
    '204': { description: 'Removed' },
    '401': err('Step-up needed (the body carries an intent)'),
    '404': err('No such phone'),
  },
};
