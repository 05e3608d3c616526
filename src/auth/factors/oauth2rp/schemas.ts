import { err, pathParams, type RouteSchema } from '../../../core/routeschema.js';

/** The route schemas of this factor's endpoints: what Fastify checks and /openapi.json describes (src/api/openapi.ts). */
export const GET_AUTH_OAUTH2RP: RouteSchema = {
  summary: 'The Apps set up as identity providers (the sign-in page shows one button each)',
  security: [],
  response: {
    '200': {
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
};

export const POST_AUTH_OAUTH2RP_ID: RouteSchema = {
  summary: 'Starts a sign-in (or, with link=true, a link) through the App as identity provider',
  security: [],
  params: { type: 'object', properties: { appID: { type: 'string' } }, required: ['appID'] },
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: {
            intent: { type: 'string', description: 'A signed intent (optional)' },
            next: {
              type: 'string',
              description: 'Return URL after sign-in, or a BrowserLocation {"URL": ...}',
            },
            link: { type: 'string', enum: ['true', 'false'], description: 'Link to the signed-in account' },
          },
          required: [],
        },
      },
    },
  },
  response: {
    '200': {
      description: 'BrowserLocation: the provider authorization URL to send the browser to',
      content: {
        'application/json': {
          schema: { type: 'object', required: ['URL'], properties: { URL: { type: 'string' } } },
        },
      },
    },
    '400': err('Invalid field or intent'),
    '401': err('link=true: the session must be signed in well enough to change credentials'),
    '403': err('CSRF check failed'),
    '404': err('No such App, or it is not set up as an identity provider'),
    '502': err('Provider Unavailable'),
  },
};

export const GET_AUTH_OAUTH2RP_ID_CALLBACK: RouteSchema = {
  summary: "The provider's redirect back (code, state, iss): signs the browser's session in",
  security: [],
  params: { type: 'object', properties: { appID: { type: 'string' } }, required: ['appID'] },
  response: {
    '303': { description: 'Signed in: to /signin?return=<next>&intent=<intent>, which finishes the sign-in' },
    '400': { description: 'Federation Failed (HTML page; X-Error-Code)' },
    '403': { description: 'Account Not Linked or user disabled (HTML page; X-Error-Code)' },
    '409': { description: 'The identity is linked to another user (HTML page)' },
    '502': { description: 'Provider Unavailable (HTML page)' },
  },
};

export const GET_AUTH_OAUTH2RP_LINKS: RouteSchema = {
  summary: "The caller's federated links (administrators and audit: ?user=<id>)",
  response: {
    '200': {
      description: 'ID, AppID, Issuer, Subject, Email, CreateTime, LastUsed of each link',
      content: { 'application/json': { schema: { type: 'array', items: { type: 'object' } } } },
    },
    '401': err('Unauthenticated'),
    '403': err('Forbidden'),
  },
};

export const DELETE_AUTH_OAUTH2RP_LINKS_ID: RouteSchema = {
  summary: 'Removes a federated link (a credential change: step-up rules of docs/signin.md)',
  params: pathParams('id'),
  response: {
    '204': { description: 'Removed' },
    '401': err('Insufficient Integrity'),
    '403': err('Forbidden'),
    '404': err('Not Found'),
  },
};
