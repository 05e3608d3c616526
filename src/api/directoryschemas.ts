import { err, pathParams, type RouteSchema, ref } from '../core/routeschema.js';
import { CLAIM_MAX, LEASE_MAX_S, LEASE_MIN_S } from '../directory/changes.js';

/** The route schemas of directory.ts: what Fastify checks and /openapi.json describes (src/api/openapi.ts). */
export const transitionSchema = (kind: string, summary: string): RouteSchema => ({
  tags: [kind],
  summary: `${summary}; the lifecycle table is in docs/directory.md`,
  params: pathParams('id'),
  response: {
    200: {
      description: `The ${kind} after the transition`,
      content: { 'application/json': { schema: ref(kind) } },
    },
    403: err('Not allowed for these credentials'),
    404: err('No such object'),
    409: err('Not allowed from the current state (named in the message)'),
  },
});
export const PLAN_TRANSITIONS = {
  approve: 'Approve the plan and its planned changes (admin)',
  cancel: 'Cancel the plan and its changes not yet in progress (admin, sync)',
};
export const CHANGE_TRANSITIONS = {
  approve: 'Approve a planned change (admin)',
  cancel: 'Cancel a planned, approved or failed change (admin, sync)',
  retry: 'Approve a failed change again (admin, sync)',
};
export const POST_ACCOUNTCHANGES_CLAIM: RouteSchema = {
  tags: ['AccountChange'],
  summary:
    "A provisioning agent claims changes of its App (Bearer: the App's proxy token); also its heartbeat",
  security: [{ proxyToken: [] }],
  body: {
    content: {
      'application/json': {
        schema: {
          type: ['object', 'null'],
          properties: {
            Name: { type: ['string', 'null'] },
            Version: { type: ['string', 'null'] },
            Max: { type: ['integer', 'null'], minimum: 1, maximum: CLAIM_MAX },
            LeaseSeconds: { type: ['integer', 'null'], minimum: LEASE_MIN_S, maximum: LEASE_MAX_S },
          },
          required: [],
          additionalProperties: false,
        },
      },
    },
  },
  response: {
    '200': {
      description: 'RemoteAgentID and Changes: [{Change, Lease, InitialPassword?}]',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '400': err('Bad body'),
    '401': err('Missing or invalid proxy token'),
  },
  validatedBy: 'schema',
};

export const POST_ACCOUNTCHANGES_ID_RESULT: RouteSchema = {
  tags: ['AccountChange'],
  summary: 'The lease holder reports a change applied or failed',
  security: [{ proxyToken: [] }],
  params: pathParams('id'),
  body: {
    content: {
      'application/json': {
        schema: {
          type: ['object', 'null'],
          properties: {
            Lease: { type: 'string', minLength: 1 },
            Result: { type: 'string', enum: ['applied', 'failed'] },
            Error: { type: ['string', 'null'] },
          },
          required: ['Lease', 'Result'],
          additionalProperties: false,
        },
      },
    },
  },
  response: {
    '200': { description: 'The change', content: { 'application/json': { schema: ref('AccountChange') } } },
    '400': err('Bad body'),
    '401': err('Missing or invalid proxy token'),
    '404': err("No such change of this agent's App"),
    '409': err('The lease is not the current one, or the state does not allow it'),
  },
  validatedBy: 'schema',
};

export const GET_ACCOUNTS_ID_PASSWORD: RouteSchema = {
  tags: ['Account'],
  summary: "Whether an initial password waits (the account's user or an administrator)",
  params: pathParams('id'),
  response: {
    '200': {
      description: 'AccountID, HaveInitialPassword, PasswordFetchTime, PasswordFetchedBy',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '404': err('No such account (or not yours)'),
  },
};

export const POST_ACCOUNTS_ID_PASSWORD: RouteSchema = {
  tags: ['Account'],
  summary: 'Fetch the initial password: once; afterwards it is gone',
  params: pathParams('id'),
  response: {
    '200': {
      description: 'AccountID and Password',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: { AccountID: { type: 'string' }, Password: { type: 'string' } },
          },
        },
      },
    },
    '404': err('No such account, not yours, or no password (fetched already)'),
  },
};

export const POST_USERS_ID_ACCOUNTS_SUGGEST: RouteSchema = {
  tags: ['User'],
  summary: 'The account changes the user should have; with Plan (admin, sync), also a plan of them',
  params: pathParams('id'),
  body: {
    content: {
      'application/json': {
        schema: {
          type: ['object', 'null'],
          properties: {
            Plan: {
              type: ['object', 'null'],
              properties: { Name: { type: 'string' }, Reason: { type: 'string' } },
              additionalProperties: false,
            },
          },
          required: [],
          additionalProperties: false,
        },
      },
    },
  },
  response: {
    '200': {
      description: 'UserID and Changes (AccountSuggestion list)',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '201': {
      description: 'A plan was made: UserID, Changes, PlanID, PlanState',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '403': err('Plan needs admin or sync'),
    '404': err('No such user (or not visible to you)'),
  },
  validatedBy: 'schema',
};

export const POST_USERS_ID_DISABLE: RouteSchema = {
  tags: ['User'],
  summary: 'Disable the user: sessions and API keys revoked, accounts disabled or deleted (admin, sync)',
  params: pathParams('id'),
  body: {
    content: {
      'application/json': {
        schema: {
          type: ['object', 'null'],
          properties: { Reason: { type: ['string', 'null'] } },
          required: [],
          additionalProperties: false,
        },
      },
    },
  },
  response: {
    '200': {
      description: 'DisableUserResult',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '403': err('Not allowed (sync cannot disable an administrator)'),
    '404': err('No such user'),
    '409': err('You cannot disable yourself'),
  },
  validatedBy: 'schema',
};

export const POST_USERS_ID_MERGE: RouteSchema = {
  tags: ['User'],
  summary: 'Merge the user given as ?from= (or body From) into :id (admin)',
  params: pathParams('id'),
  querystring: { type: 'object', properties: { from: { type: 'string' } } },
  body: {
    content: {
      'application/json': {
        schema: {
          type: 'object',
          properties: { From: { type: 'string' } },
          required: [],
          additionalProperties: false,
        },
      },
    },
  },
  response: {
    '204': { description: 'Merged' },
    '400': err('from missing or the same user'),
    '403': err('Not an administrator'),
    '404': err('No such user'),
    '409': err('One of them was merged already'),
  },
  // handler: a repeated ?from= is Bad Request ("give from once"), where the schema would say Invalid Field.
  validatedBy: 'handler',
};

export const GET_USERS_MERGE: RouteSchema = {
  tags: ['User'],
  summary: 'Users that look like the same person (admin, audit, sync)',
  response: {
    '200': {
      description: 'One UserMergeSuggestion per line: UserIDs, Reason, Detail',
      content: { 'application/x-json-lines': { schema: { type: 'object' } } },
    },
    '403': err('Not allowed'),
  },
};
