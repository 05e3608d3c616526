/** The phone factor's endpoints in the OpenAPI document (docs/signin.md, "Phone"). */
const err = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const form = (properties: Record<string, unknown>, required: string[]) => ({
  content: {
    'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } },
  },
});
const jsonBody = (properties: Record<string, unknown>, required: string[]) => ({
  required: true,
  content: { 'application/json': { schema: { type: 'object', properties, required } } },
});
const device = {
  type: 'object',
  description: 'PSTNDevice',
  properties: {
    ID: { type: 'string' },
    Number: { type: 'string', description: 'E.164 (masked, ••••••67, on GET /auth/pstn)' },
    Mode: { type: 'string', enum: ['sms', 'voice'] },
    Verified: { type: 'boolean' },
    CreateTime: { type: 'string', format: 'date-time' },
  },
};
const list = (description: string) => ({
  description,
  content: { 'application/json': { schema: { type: 'array', items: device } } },
});
const id = [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }];
const user = [{ name: 'user', in: 'query', schema: { type: 'string' } }];
const throttled = err('Too many attempts or messages (header X-Next-Attempt)');
const stepUp = err('Step-up needed (the body carries an intent)');
const tags = ['Sign-in: phone'];

export const pstnPaths: Record<string, Record<string, unknown>> = {
  '/auth/pstn': {
    get: {
      tags,
      summary: "The signing-in user's phones, numbers masked",
      security: [],
      responses: { 200: list('Phones'), 400: err('No user named yet') },
    },
  },
  '/auth/pstn/{id}/start': {
    post: {
      tags,
      summary: 'Sends a sign-in code by SMS or voice call, per the device',
      security: [],
      parameters: id,
      requestBody: form({ intent: { type: 'string' } }, []),
      responses: {
        204: { description: 'Sent' },
        400: err('No user named yet; bad intent'),
        404: err('Not a phone of this user'),
        422: err('Device Not Verified'),
        429: throttled,
        503: err('The provider did not accept the message'),
      },
    },
  },
  '/auth/pstn/{id}/finish': {
    post: {
      tags,
      summary: 'The code received; proves the phone in this session',
      security: [],
      parameters: id,
      requestBody: form({ intent: { type: 'string' }, code: { type: 'string' } }, ['code']),
      responses: {
        204: { description: 'Proven' },
        403: err('Code incorrect, used or expired'),
        429: throttled,
      },
    },
  },
  '/auth/pstn/{id}': {
    delete: {
      tags,
      summary: 'Cancels the pending sign-in code',
      security: [],
      parameters: id,
      responses: { 204: { description: 'Cancelled' } },
    },
  },
  '/auth/enroll/pstn': {
    get: { tags, summary: "The user's phones", parameters: user, responses: { 200: list('Phones') } },
    post: {
      tags,
      summary: 'Adds a phone (unverified) and sends it a verification code (step-up)',
      parameters: user,
      requestBody: jsonBody(
        { Number: { type: 'string' }, Mode: { type: 'string', enum: ['sms', 'voice'] } },
        ['Number'],
      ),
      responses: {
        201: { description: 'Added', content: { 'application/json': { schema: device } } },
        400: err('Number not E.164, or Mode not sms/voice'),
        401: stepUp,
        403: err('An API key that is not an administrator’s reset'),
        409: err('Number already added, or 5 phones already'),
        429: throttled,
        503: err('The provider did not accept the message'),
      },
    },
  },
  '/auth/enroll/pstn/{id}/verify': {
    post: {
      tags,
      summary: 'Verifies the number with the code sent to it (step-up)',
      parameters: [...id, ...user],
      requestBody: jsonBody({ Code: { type: 'string' } }, ['Code']),
      responses: {
        204: { description: 'Verified' },
        401: stepUp,
        403: err('Code incorrect'),
        404: err('No such phone'),
        429: throttled,
      },
    },
  },
  '/auth/enroll/pstn/{id}': {
    delete: {
      tags,
      summary: 'Removes a phone (step-up)',
      parameters: [...id, ...user],
      responses: { 204: { description: 'Removed' }, 401: stepUp, 404: err('No such phone') },
    },
  },
};
