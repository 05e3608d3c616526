import { err, type Json, jsonObject, pathParams, queryOf, type RouteSchema } from '../core/routeschema.js';

/**
 * The route schemas of src/api/backchannel.ts: what Fastify checks and /openapi.json describes
 * (docs/proxy.md, "Back channel"). Most bodies are validated by their schemas (the proxy token
 * is checked before, src/api/proxytoken.ts); the handlers keep their own checks (body()).
 */

const tags = ['Proxy back channel'];
const proxyToken = [{ proxyToken: [] }];
const str = { type: 'string' };
/** The handler's own check took strings up to 4096 characters (body() in backchannel.ts). */
const text = { type: 'string', maxLength: 4096 };
const jsonBody = (properties: Json, required: string[]): Json => ({
  required: true,
  content: { 'application/json': { schema: { type: 'object', properties, required } } },
});
const identity = jsonObject('The identity to pass upstream', {
  UserID: str,
  UserName: str,
  Email: str,
  FullName: str,
  SessionID: str,
  Expires: { type: 'string', format: 'date-time' },
  Groups: { type: 'array', items: str },
  IntegrityLevel: { type: 'integer' },
});
const refused = {
  400: err('A bad field'),
  401: err('Missing or invalid proxy token'),
  403: err('Refused: the credential or session is not valid, or the App does not serve the user'),
};

export const PROXY_TOKEN: RouteSchema = {
  tags,
  summary: 'Issue (or replace) the token tying a proxy to this App (admin); shown once',
  params: pathParams('id'),
  response: {
    201: jsonObject('The token', { AppID: str, Token: str }),
    403: err('Not allowed for these credentials'),
    404: err('No such App'),
  },
};

export const PROXY_REGISTER: RouteSchema = {
  tags,
  security: proxyToken,
  summary: 'A proxy starts: its App, the hosts it serves and where users ask for access',
  validatedBy: 'schema',
  body: jsonBody({ Name: text, Version: text, Address: text }, ['Name', 'Version', 'Address']),
  response: {
    200: jsonObject('The App and its routing', {
      AppID: str,
      AppName: str,
      RemoteAgentID: str,
      VirtualHosts: { type: 'array', items: str },
      ProxyAuth: str,
      Hosts: { type: 'array', items: { type: 'object' } },
      Origins: { type: 'array', items: str },
      AccessRequestURL: str,
    }),
    400: refused[400],
    401: refused[401],
  },
};

export const PROXY_APIKEY: RouteSchema = {
  tags,
  security: proxyToken,
  summary: 'Who an API key (scope user or admin) acts for, if the App serves them',
  validatedBy: 'schema',
  body: jsonBody({ Key: text }, ['Key']),
  response: { 200: identity, ...refused },
};

export const PROXY_SESSION_EXCHANGE: RouteSchema = {
  tags,
  security: proxyToken,
  summary: 'Redeem the one-time sign-in code of GET /proxy/v1/signin for the session’s identity',
  validatedBy: 'schema',
  body: jsonBody({ Code: text }, ['Code']),
  response: { 200: identity, ...refused },
};

export const PROXY_SESSION_CHECK: RouteSchema = {
  tags,
  security: proxyToken,
  summary: 'Is the session still valid (and the App still serves its user)? Its identity now',
  validatedBy: 'schema',
  body: jsonBody({ SessionID: text }, ['SessionID']),
  response: { 200: identity, ...refused },
};

export const PROXY_ACCESS_CHECK: RouteSchema = {
  tags,
  security: proxyToken,
  summary: 'Is the user an active member of the groups, at the session’s level? Marks the use',
  // handler: a bad group is named Groups (the schema would name Groups[i]).
  validatedBy: 'handler',
  body: jsonBody(
    {
      UserID: str,
      Groups: { type: 'array', items: str },
      Op: { type: 'string', enum: ['and', 'or'] },
      Next: str,
      SessionID: str,
    },
    ['UserID', 'Groups', 'Op', 'Next'],
  ),
  response: {
    200: jsonObject('The verdict, per group', {
      Satisfied: { type: 'boolean' },
      Location: str,
      Results: { type: 'array', items: { type: 'object' } },
    }),
    ...refused,
    503: err('Group memberships are not available in this build'),
  },
};

export const PROXY_SIGNIN: RouteSchema = {
  tags,
  security: [{ session: [] }, {}],
  summary:
    'Browser: signed in, back to the proxy’s callback with a one-time code; else to the sign-in pages first',
  // handler: a missing or bad app, state or return is Bad Request (named), not Invalid Field.
  validatedBy: 'handler',
  querystring: queryOf({ app: str, state: str, return: { type: 'string', format: 'uri' } }, [
    'app',
    'state',
    'return',
  ]),
  response: {
    302: { description: 'To the proxy callback (code, state), or to the sign-in page' },
    400: err('A bad app, state or return'),
    403: err('The App does not serve the signed-in user'),
  },
};
