/** The e-mail link's endpoints in the OpenAPI document (docs/signin.md, "E-mail links"). */
const err = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const form = (properties: Record<string, unknown>, required: string[]) => ({
  required: true,
  content: {
    'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } },
  },
});
const json = (description: string, properties: Record<string, unknown>) => ({
  description,
  content: { 'application/json': { schema: { type: 'object', properties } } },
});
const token = form(
  { token: { type: 'string', description: '<user ID>.<secret>, the fragment of the link' } },
  ['token'],
);
const throttled = err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)');
const tags = ['Sign-in: e-mail link'];

export const otpPaths: Record<string, Record<string, unknown>> = {
  '/auth/otp/start': {
    post: {
      tags,
      summary:
        "Sends a sign-in link to one of the signing-in user's verified addresses (session cookie of the sign-in)",
      security: [],
      requestBody: form(
        {
          intent: { type: 'string' },
          email: { type: 'string', description: "Defaults to the user's primary address" },
        },
        [],
      ),
      responses: {
        200: json('Sent', {
          Email: { type: 'string', description: 'The address, masked (a•••@example.com)' },
          ExpireTime: { type: 'string', format: 'date-time' },
        }),
        400: err('No user named yet; email is not one of the user’s addresses; bad intent'),
        409: err('E-mail links are not turned on for this user'),
        429: throttled,
        503: err('The message could not be sent'),
      },
    },
  },
  '/auth/otp/inspect': {
    post: {
      tags,
      summary: 'Shows which device asked for a link (does not spend it)',
      security: [],
      requestBody: token,
      responses: {
        200: json('The request', {
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
        }),
        403: err('Not a live link'),
        429: throttled,
      },
    },
  },
  '/auth/otp/finish': {
    post: {
      tags,
      summary: 'Approves: the session that asked proves the e-mail factor (this browser gets nothing)',
      security: [],
      requestBody: token,
      responses: {
        204: { description: 'Approved' },
        403: err('Not a live link (wrong, used or expired)'),
        409: err('The sign-in that asked has ended'),
        429: throttled,
      },
    },
  },
  '/auth/otp/refuse': {
    post: {
      tags,
      summary: '"This was not me": spends the link and ends the session that asked',
      security: [],
      requestBody: token,
      responses: { 204: { description: 'Refused' }, 403: err('Not a live link'), 429: throttled },
    },
  },
  '/auth/enroll/otp': {
    get: {
      tags,
      summary: 'Whether e-mail links are on, and the addresses they can go to',
      parameters: [{ name: 'user', in: 'query', schema: { type: 'string' } }],
      responses: {
        200: json('State', {
          Enabled: { type: 'boolean' },
          Addresses: { type: 'array', items: { type: 'string' } },
        }),
      },
    },
    put: {
      tags,
      summary: 'Turns e-mail links on (a credential change: step-up)',
      parameters: [{ name: 'user', in: 'query', schema: { type: 'string' } }],
      responses: {
        204: { description: 'On' },
        401: err('Step-up needed (the body carries an intent)'),
        403: err('An API key that is not an administrator’s reset'),
        409: err('The user has no e-mail address'),
      },
    },
    delete: {
      tags,
      summary: 'Turns e-mail links off and voids pending links (step-up)',
      parameters: [{ name: 'user', in: 'query', schema: { type: 'string' } }],
      responses: { 204: { description: 'Off' }, 401: err('Step-up needed'), 403: err('As for PUT') },
    },
  },
};
