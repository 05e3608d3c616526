/**
 * The OpenAPI paths of sign-in through other identity providers (src/auth/factors/oauth2rp/,
 * docs/federation.md), merged into /openapi.json by src/api/openapi.ts.
 */
type Json = Record<string, unknown>;

const err = (description: string): Json => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const appParam = { name: 'appID', in: 'path', required: true, schema: { type: 'string' } };
const form = (properties: Json, required: string[] = []): Json => ({
  content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } } },
});

export const federationPaths: Record<string, Json> = {
  '/auth/oauth2rp': {
    get: {
      summary: 'The Apps set up as identity providers (the sign-in page shows one button each)',
      security: [],
      responses: {
        200: {
          description: 'ID and Name of each provider',
          content: {
            'application/json': {
              schema: {
                type: 'array',
                items: { type: 'object', properties: { ID: { type: 'string' }, Name: { type: 'string' } } },
              },
            },
          },
        },
      },
    },
  },
  '/auth/oauth2rp/{appID}': {
    post: {
      summary: 'Starts a sign-in (or, with link=true, a link) through the App as identity provider',
      security: [],
      parameters: [appParam],
      requestBody: form({
        intent: { type: 'string', description: 'A signed intent (optional)' },
        next: { type: 'string', description: 'Return URL after sign-in, or a BrowserLocation {"URL": ...}' },
        link: { type: 'string', enum: ['true', 'false'], description: 'Link to the signed-in account' },
      }),
      responses: {
        200: {
          description: 'BrowserLocation: the provider authorization URL to send the browser to',
          content: {
            'application/json': {
              schema: { type: 'object', required: ['URL'], properties: { URL: { type: 'string' } } },
            },
          },
        },
        400: err('Invalid field or intent'),
        401: err('link=true: the session must be signed in well enough to change credentials'),
        403: err('CSRF check failed'),
        404: err('No such App, or it is not set up as an identity provider'),
        502: err('Provider Unavailable'),
      },
    },
  },
  '/auth/oauth2rp/{appID}/callback': {
    get: {
      summary: "The provider's redirect back (code, state, iss): signs the browser's session in",
      security: [],
      parameters: [appParam],
      responses: {
        303: {
          description: 'Signed in: to /signin?return=<next>&intent=<intent>, which finishes the sign-in',
        },
        400: { description: 'Federation Failed (HTML page; X-Error-Code)' },
        403: { description: 'Account Not Linked or user disabled (HTML page; X-Error-Code)' },
        409: { description: 'The identity is linked to another user (HTML page)' },
        502: { description: 'Provider Unavailable (HTML page)' },
      },
    },
  },
  '/auth/oauth2rp/links': {
    get: {
      summary: "The caller's federated links (administrators and audit: ?user=<id>)",
      responses: {
        200: {
          description: 'ID, AppID, Issuer, Subject, Email, CreateTime, LastUsed of each link',
          content: { 'application/json': { schema: { type: 'array', items: { type: 'object' } } } },
        },
        401: err('Unauthenticated'),
        403: err('Forbidden'),
      },
    },
  },
  '/auth/oauth2rp/links/{id}': {
    delete: {
      summary: 'Removes a federated link (a credential change: step-up rules of docs/signin.md)',
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      responses: {
        204: { description: 'Removed' },
        401: err('Insufficient Integrity'),
        403: err('Forbidden'),
        404: err('Not Found'),
      },
    },
  },
};
