/** The mobile push endpoints in the OpenAPI document (docs/signin.md, "Mobile push"). */
const err = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const form = (properties: Record<string, unknown>, required: string[]) => ({
  content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } } },
});
const json = (description: string, properties: Record<string, unknown>) => ({
  description,
  content: { 'application/json': { schema: { type: 'object', properties } } },
});
const token = { token: { type: 'string', description: '<user ID>.<secret>, from the pushed message' } };
const throttled = err('Too many attempts or pushes (header X-Next-Attempt)');
const stepUp = err('Step-up needed (the body carries an intent)');
const user = [{ name: 'user', in: 'query', schema: { type: 'string' } }];
const tags = ['Sign-in: mobile push'];
const device = {
  ID: { type: 'string' },
  Name: { type: 'string' },
  CreateTime: { type: 'string', format: 'date-time' },
};

export const mobilePaths: Record<string, Record<string, unknown>> = {
  '/auth/mobile/vapid': {
    get: {
      tags,
      summary: 'The VAPID public key (applicationServerKey)',
      security: [],
      responses: { 200: json('Key', { PublicKey: { type: 'string' } }) },
    },
  },
  '/auth/mobile/start': {
    post: {
      tags,
      summary: 'Pushes a sign-in request to every registered device',
      security: [],
      requestBody: form({ intent: { type: 'string' } }, []),
      responses: {
        204: { description: 'Pushed (to at least one device)' },
        400: err('No mobile devices found; no user named yet; bad intent'),
        429: throttled,
        503: err('No device could be reached'),
      },
    },
  },
  '/auth/mobile': {
    get: {
      tags,
      summary: 'The number to show on the asking page while the request waits',
      security: [],
      responses: {
        200: json('Pending', {
          Number: { type: 'integer' },
          ExpireTime: { type: 'string', format: 'date-time' },
        }),
        404: err('Nothing pending'),
      },
    },
  },
  '/auth/mobile/inspect': {
    post: {
      tags,
      summary: 'Who asked (for the device page); spends nothing',
      security: [],
      requestBody: form(token, ['token']),
      responses: {
        200: json('The request', {
          Email: { type: 'string' },
          RequestTime: { type: 'string' },
          ExpireTime: { type: 'string' },
          Device: { type: 'object' },
        }),
        403: err('Not a live request'),
        429: throttled,
      },
    },
  },
  '/auth/mobile/approve': {
    post: {
      tags,
      summary: 'Approves with the number shown on the asking page; the request is spent either way',
      security: [],
      requestBody: form({ ...token, number: { type: 'string' } }, ['token', 'number']),
      responses: {
        204: { description: 'The asking session proves the device' },
        403: err('Wrong number, or not a live request'),
        409: err('The asking session has ended'),
        429: throttled,
      },
    },
  },
  '/auth/mobile/deny': {
    post: {
      tags,
      summary: 'Denies: spends the request and ends the asking session',
      security: [],
      requestBody: form(token, ['token']),
      responses: { 204: { description: 'Denied' }, 403: err('Not a live request'), 429: throttled },
    },
  },
  '/auth/enroll/mobile': {
    get: {
      tags,
      summary: "The user's devices",
      parameters: user,
      responses: {
        200: {
          description: 'Devices',
          content: {
            'application/json': { schema: { type: 'array', items: { type: 'object', properties: device } } },
          },
        },
      },
    },
    post: {
      tags,
      summary: 'Registers a Web Push subscription as a device (step-up)',
      parameters: user,
      requestBody: {
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
      responses: {
        201: json('Registered', device),
        400: err('Endpoint not on an allowed push service, or bad keys'),
        401: stepUp,
        403: err('An API key that is not an administrator’s reset'),
        409: err('10 devices already'),
      },
    },
  },
  '/auth/enroll/mobile/{id}': {
    delete: {
      tags,
      summary: 'Removes a device (step-up)',
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }, ...user],
      responses: { 204: { description: 'Removed' }, 401: stepUp, 404: err('No such device') },
    },
  },
};
