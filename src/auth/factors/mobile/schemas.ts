import { err, pathParams, type RouteSchema, USER_QUERY } from '../../../core/routeschema.js';

/** The route schemas of this factor's endpoints: what Fastify checks and /openapi.json describes (src/api/openapi.ts). */
export const GET_AUTH_MOBILE_VAPID: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'The VAPID public key (applicationServerKey)',
  security: [],
  response: {
    '200': {
      description: 'Key',
      content: {
        'application/json': { schema: { type: 'object', properties: { PublicKey: { type: 'string' } } } },
      },
    },
  },
};

export const POST_AUTH_MOBILE_START: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'Pushes a sign-in request to every registered device',
  security: [],
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: { type: 'object', properties: { intent: { type: 'string' } }, required: [] },
      },
    },
  },
  response: {
    '204': { description: 'Pushed (to at least one device)' },
    '400': err('No mobile devices found; no user named yet; bad intent'),
    '429': err('Too many attempts or pushes (header X-Next-Attempt)'),
    '503': err('No device could be reached'),
  },
};

export const GET_AUTH_MOBILE: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'The number to show on the asking page while the request waits',
  security: [],
  response: {
    '200': {
      description: 'Pending',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: { Number: { type: 'integer' }, ExpireTime: { type: 'string', format: 'date-time' } },
          },
        },
      },
    },
    '404': err('Nothing pending'),
  },
};

export const POST_AUTH_MOBILE_INSPECT: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'Who asked (for the device page); spends nothing',
  security: [],
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: {
            token: { type: 'string', description: '<user ID>.<secret>, from the pushed message' },
          },
          required: ['token'],
        },
      },
    },
  },
  response: {
    '200': {
      description: 'The request',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              Email: { type: 'string' },
              RequestTime: { type: 'string' },
              ExpireTime: { type: 'string' },
              Device: { type: 'object' },
            },
          },
        },
      },
    },
    '403': err('Not a live request'),
    '429': err('Too many attempts or pushes (header X-Next-Attempt)'),
  },
};

export const POST_AUTH_MOBILE_APPROVE: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'Approves with the number shown on the asking page; the request is spent either way',
  security: [],
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: {
            token: { type: 'string', description: '<user ID>.<secret>, from the pushed message' },
            number: { type: 'string' },
          },
          required: ['token', 'number'],
        },
      },
    },
  },
  response: {
    '204': { description: 'The asking session proves the device' },
    '403': err('Wrong number, or not a live request'),
    '409': err('The asking session has ended'),
    '429': err('Too many attempts or pushes (header X-Next-Attempt)'),
  },
};

export const POST_AUTH_MOBILE_DENY: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'Denies: spends the request and ends the asking session',
  security: [],
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: {
            token: { type: 'string', description: '<user ID>.<secret>, from the pushed message' },
          },
          required: ['token'],
        },
      },
    },
  },
  response: {
    '204': { description: 'Denied' },
    '403': err('Not a live request'),
    '429': err('Too many attempts or pushes (header X-Next-Attempt)'),
  },
};

export const GET_AUTH_ENROLL_MOBILE: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: "The user's devices",
  querystring: USER_QUERY,
  response: {
    '200': {
      description: 'Devices',
      content: {
        'application/json': {
          schema: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                ID: { type: 'string' },
                Name: { type: 'string' },
                CreateTime: { type: 'string', format: 'date-time' },
              },
            },
          },
        },
      },
    },
  },
};

export const POST_AUTH_ENROLL_MOBILE: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'Registers a Web Push subscription as a device (step-up)',
  querystring: USER_QUERY,
  body: {
    required: true,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          properties: {
            Name: { type: 'string' },
            Subscription: {
              type: 'object',
              description: 'PushSubscription.toJSON(): endpoint, keys.p256dh, keys.auth',
            },
          },
          required: ['Subscription'],
        },
      },
    },
  },
  response: {
    '201': {
      description: 'Registered',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              ID: { type: 'string' },
              Name: { type: 'string' },
              CreateTime: { type: 'string', format: 'date-time' },
            },
          },
        },
      },
    },
    '400': err('Endpoint not on an allowed push service, or bad keys'),
    '401': err('Step-up needed (the body carries an intent)'),
    '403': err('An API key that is not an administrator’s reset'),
    '409': err('10 devices already'),
  },
};

export const DELETE_AUTH_ENROLL_MOBILE_ID: RouteSchema = {
  tags: ['Sign-in: mobile push'],
  summary: 'Removes a device (step-up)',
  params: pathParams('id'),
  querystring: USER_QUERY,
  response: {
    '204': { description: 'Removed' },
    '401': err('Step-up needed (the body carries an intent)'),
    '404': err('No such device'),
  },
};
