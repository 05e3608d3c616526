import { err, formBody, type RouteSchema, USER_QUERY } from '../../../core/routeschema.js';

/** The route schemas of this factor's endpoints: what Fastify checks and /openapi.json describes (src/api/openapi.ts). */
export const POST_AUTH_OTP_START: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary:
    "Sends a sign-in link to one of the signing-in user's verified addresses (session cookie of the sign-in)",
  security: [],
  body: formBody(
    {
      intent: { type: 'string' },
      email: { type: 'string', description: "Defaults to the user's primary address" },
    },
    [],
    true,
  ),
  response: {
    '200': {
      description: 'Sent',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              Email: { type: 'string', description: 'The address, masked (a•••@example.com)' },
              ExpireTime: { type: 'string', format: 'date-time' },
            },
          },
        },
      },
    },
    '400': err('No user named yet; email is not one of the user’s addresses; bad intent'),
    '409': err('E-mail links are not turned on for this user'),
    '429': err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)'),
    '503': err('The message could not be sent'),
  },
};

export const POST_AUTH_OTP_INSPECT: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary: 'Shows which device asked for a link (does not spend it)',
  security: [],
  body: formBody(
    {
      token: { type: 'string', description: '<user ID>.<secret>, the fragment of the link' },
    },
    ['token'],
  ),
  response: {
    '200': {
      description: 'The request',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              Email: { type: 'string' },
              SentTo: { type: 'string' },
              RequestTime: { type: 'string', format: 'date-time' },
              ExpireTime: { type: 'string', format: 'date-time' },
              SameDevice: { type: 'boolean' },
              Device: {
                type: 'object',
                properties: {
                  Browser: { type: 'string' },
                  UserAgent: { type: 'string' },
                  Address: { type: 'string' },
                  Location: {
                    type: 'object',
                    properties: { Latitude: { type: 'number' }, Longitude: { type: 'number' } },
                  },
                },
              },
            },
          },
        },
      },
    },
    '403': err('Not a live link'),
    '429': err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)'),
  },
};

export const POST_AUTH_OTP_FINISH: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary: 'Approves: the session that asked proves the e-mail factor (this browser gets nothing)',
  security: [],
  body: formBody(
    {
      token: { type: 'string', description: '<user ID>.<secret>, the fragment of the link' },
    },
    ['token'],
  ),
  response: {
    '204': { description: 'Approved' },
    '403': err('Not a live link (wrong, used or expired)'),
    '409': err('The sign-in that asked has ended'),
    '429': err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)'),
  },
};

export const POST_AUTH_OTP_REFUSE: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary: '"This was not me": spends the link and ends the session that asked',
  security: [],
  body: formBody(
    {
      token: { type: 'string', description: '<user ID>.<secret>, the fragment of the link' },
    },
    ['token'],
  ),
  response: {
    '204': { description: 'Refused' },
    '403': err('Not a live link'),
    '429': err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)'),
  },
};

export const GET_AUTH_ENROLL_OTP: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary: 'Whether e-mail links are on, and the addresses they can go to',
  querystring: USER_QUERY,
  response: {
    '200': {
      description: 'State',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              Enabled: { type: 'boolean' },
              Addresses: { type: 'array', items: { type: 'string' } },
            },
          },
        },
      },
    },
  },
};

export const PUT_AUTH_ENROLL_OTP: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary: 'Turns e-mail links on (a credential change: step-up)',
  querystring: USER_QUERY,
  response: {
    '204': { description: 'On' },
    '401': err('Step-up needed (the body carries an intent)'),
    '403': err('An API key that is not an administrator’s reset'),
    '409': err('The user has no e-mail address'),
  },
};

export const DELETE_AUTH_ENROLL_OTP: RouteSchema = {
  tags: ['Sign-in: e-mail link'],
  summary: 'Turns e-mail links off and voids pending links (step-up)',
  querystring: USER_QUERY,
  response: { '204': { description: 'Off' }, '401': err('Step-up needed'), '403': err('As for PUT') },
};
