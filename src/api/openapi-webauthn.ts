/**
 * The OpenAPI description of the security-key and passkey endpoints (src/auth/factors/u2f;
 * docs/signin.md, "Security keys and passkeys"), merged into /openapi.json by openapi.ts.
 */
type Json = Record<string, unknown>;

const err = (description: string): Json => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const json = (description: string, schema: Json = { type: 'object' }): Json => ({
  description,
  content: { 'application/json': { schema } },
});
const form = (properties: Record<string, Json>): Json => ({
  content: {
    'application/x-www-form-urlencoded': { schema: { type: 'object', properties } },
  },
});
const assertion: Json = {
  type: 'object',
  description:
    'The PublicKeyCredential from navigator.credentials.get() as WebAuthn JSON (base64url byte strings), plus an optional "intent"',
  required: ['id', 'type', 'response'],
  properties: {
    id: { type: 'string' },
    type: { const: 'public-key' },
    response: {
      type: 'object',
      properties: {
        clientDataJSON: { type: 'string' },
        authenticatorData: { type: 'string' },
        signature: { type: 'string' },
        userHandle: { type: 'string' },
      },
    },
    intent: { type: 'string' },
  },
};
const key: Json = {
  type: 'object',
  properties: {
    ID: { type: 'string' },
    Name: { type: 'string' },
    Passkey: { type: 'boolean' },
    DeviceBound: { type: 'boolean' },
    UserVerified: { type: 'boolean' },
    CreateTime: { type: 'string', format: 'date-time' },
    LastUsed: { type: 'string' },
  },
};
const sessionOnly = { security: [] };
const tags = ['Sign-in: security keys and passkeys'];

export const WEBAUTHN_PATHS: Record<string, Json> = {
  '/auth/u2f/start': {
    post: {
      tags,
      ...sessionOnly,
      summary: 'Start a sign-in with a security key or passkey: the WebAuthn request options',
      requestBody: form({ intent: { type: 'string' }, email: { type: 'string' } }),
      responses: {
        200: json(
          'PublicKeyCredentialRequestOptionsJSON (challenge, rpId, allowCredentials: empty for passkeys)',
        ),
        400: err('The named user has no key, or a bad intent'),
        409: err('No sign-in URL configured: there is no relying party'),
        429: err('Too many e-mail lookups'),
      },
    },
  },
  '/auth/u2f/finish': {
    post: {
      tags,
      ...sessionOnly,
      summary: 'Answer the challenge: the session proves the key (u2f, u2f_uv or u2f_up)',
      requestBody: { content: { 'application/json': { schema: assertion } } },
      responses: {
        200: json('The session after the proof', {
          type: 'object',
          properties: {
            UserID: { type: 'string' },
            Factor: { type: 'string', enum: ['u2f', 'u2f_uv', 'u2f_up'] },
            IntegrityLevel: { type: 'integer' },
            IntegrityLevelName: { type: 'string' },
            Proven: { type: 'array', items: { type: 'string' } },
          },
        }),
        400: err('No challenge pending, already answered or expired; malformed assertion'),
        403: err('Not accepted: unknown key, bad signature, wrong origin or RP ID, counter not increasing'),
        429: err('Too many failures (X-Next-Attempt)'),
      },
    },
  },
  '/auth/enroll/u2f': {
    get: {
      tags,
      summary: "The caller's keys (administrators: ?user=)",
      responses: {
        200: json('{"Credentials": [...]}', {
          type: 'object',
          properties: { Credentials: { type: 'array', items: key } },
        }),
      },
    },
    post: {
      tags,
      summary: 'Start registering a key (own signed-in session, step-up): the WebAuthn creation options',
      responses: {
        200: json('PublicKeyCredentialCreationOptionsJSON'),
        401: err('Step-up needed (intent)'),
        403: err('API keys and administrators cannot register keys for someone'),
        409: err('No relying party configured, or 20 keys already'),
      },
    },
  },
  '/auth/enroll/u2f/confirm': {
    post: {
      tags,
      summary: "Finish registering: the browser's PublicKeyCredential",
      requestBody: {
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { Credential: { type: 'object' }, Name: { type: 'string' } },
            },
          },
        },
      },
      responses: {
        200: json('The stored key', key),
        400: err('The answer does not verify for this site'),
        401: err('Step-up needed (intent)'),
        409: err('No registration pending, already answered or expired'),
      },
    },
  },
  '/auth/enroll/u2f/{id}': {
    parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
    delete: {
      tags,
      summary: "Remove a key (step-up; an admin key's reset with ?user=)",
      responses: { 204: { description: 'Removed' }, 401: err('Step-up needed'), 404: err('No such key') },
    },
  },
};
