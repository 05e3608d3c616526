/** OpenAPI entries of the directory's endpoints (src/api/directory.ts, docs/directory.md). */
type Json = Record<string, unknown>;

const err = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const json = (description: string, schema: Json = { type: 'object' }) => ({
  description,
  content: { 'application/json': { schema } },
});
const id = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const body = (properties: Json, required: string[] = []) => ({
  content: {
    'application/json': { schema: { type: 'object', properties, required, additionalProperties: false } },
  },
});
const agent = { security: [{ proxyToken: [] }] };
const str = { type: 'string' };

const transition = (kind: string, op: string, who: string) => ({
  parameters: [id],
  post: {
    tags: [kind],
    summary: `${op} (${who}); the lifecycle table is in docs/directory.md`,
    responses: {
      200: json(`The ${kind} after the transition`, { $ref: `#/components/schemas/${kind}` }),
      403: err('Not allowed for these credentials'),
      404: err('No such object'),
      409: err('Not allowed from the current state (named in the message)'),
    },
  },
});

export const DIRECTORY_PATHS: Record<string, Json> = {
  '/accountchangeplans/{id}/approve': transition(
    'AccountChangePlan',
    'Approve the plan and its planned changes',
    'admin',
  ),
  '/accountchangeplans/{id}/cancel': transition(
    'AccountChangePlan',
    'Cancel the plan and its changes not yet in progress',
    'admin, sync',
  ),
  '/accountchanges/{id}/approve': transition('AccountChange', 'Approve a planned change', 'admin'),
  '/accountchanges/{id}/cancel': transition(
    'AccountChange',
    'Cancel a planned, approved or failed change',
    'admin, sync',
  ),
  '/accountchanges/{id}/retry': transition('AccountChange', 'Approve a failed change again', 'admin, sync'),
  '/accountchanges/claim': {
    post: {
      tags: ['AccountChange'],
      summary:
        "A provisioning agent claims changes of its App (Bearer: the App's proxy token); also its heartbeat",
      ...agent,
      requestBody: body({
        Name: str,
        Version: str,
        Max: { type: 'integer', minimum: 1, maximum: 100 },
        LeaseSeconds: { type: 'integer', minimum: 10, maximum: 3600 },
      }),
      responses: {
        200: json('RemoteAgentID and Changes: [{Change, Lease, InitialPassword?}]'),
        400: err('Bad body'),
        401: err('Missing or invalid proxy token'),
      },
    },
  },
  '/accountchanges/{id}/result': {
    parameters: [id],
    post: {
      tags: ['AccountChange'],
      summary: 'The lease holder reports a change applied or failed',
      ...agent,
      requestBody: body({ Lease: str, Result: { type: 'string', enum: ['applied', 'failed'] }, Error: str }, [
        'Lease',
        'Result',
      ]),
      responses: {
        200: json('The change', { $ref: '#/components/schemas/AccountChange' }),
        400: err('Bad body'),
        401: err('Missing or invalid proxy token'),
        404: err("No such change of this agent's App"),
        409: err('The lease is not the current one, or the state does not allow it'),
      },
    },
  },
  '/accounts/{id}/password': {
    parameters: [id],
    get: {
      tags: ['Account'],
      summary: "Whether an initial password waits (the account's user or an administrator)",
      responses: {
        200: json('AccountID, HaveInitialPassword, PasswordFetchTime, PasswordFetchedBy'),
        404: err('No such account (or not yours)'),
      },
    },
    post: {
      tags: ['Account'],
      summary: 'Fetch the initial password: once; afterwards it is gone',
      responses: {
        200: json('AccountID and Password', {
          type: 'object',
          properties: { AccountID: str, Password: str },
        }),
        404: err('No such account, not yours, or no password (fetched already)'),
      },
    },
  },
  '/users/{id}/accounts/suggest': {
    parameters: [id],
    post: {
      tags: ['User'],
      summary: 'The account changes the user should have; with Plan (admin, sync), also a plan of them',
      requestBody: body({ Plan: { type: 'object', properties: { Name: str, Reason: str } } }),
      responses: {
        200: json('UserID and Changes (AccountSuggestion list)'),
        201: json('A plan was made: UserID, Changes, PlanID, PlanState'),
        403: err('Plan needs admin or sync'),
        404: err('No such user (or not visible to you)'),
      },
    },
  },
  '/users/{id}/disable': {
    parameters: [id],
    post: {
      tags: ['User'],
      summary: 'Disable the user: sessions and API keys revoked, accounts disabled or deleted (admin, sync)',
      requestBody: body({ Reason: str }),
      responses: {
        200: json('DisableUserResult'),
        403: err('Not allowed (sync cannot disable an administrator)'),
        404: err('No such user'),
        409: err('You cannot disable yourself'),
      },
    },
  },
  '/users/{id}/merge': {
    parameters: [id, { name: 'from', in: 'query', schema: str }],
    post: {
      tags: ['User'],
      summary: 'Merge the user given as ?from= (or body From) into :id (admin)',
      requestBody: body({ From: str }),
      responses: {
        204: { description: 'Merged' },
        400: err('from missing or the same user'),
        403: err('Not an administrator'),
        404: err('No such user'),
        409: err('One of them was merged already'),
      },
    },
  },
  '/users/merge': {
    get: {
      tags: ['User'],
      summary: 'Users that look like the same person (admin, audit, sync)',
      responses: {
        200: {
          description: 'One UserMergeSuggestion per line: UserIDs, Reason, Detail',
          content: { 'application/x-json-lines': { schema: { type: 'object' } } },
        },
        403: err('Not allowed'),
      },
    },
  },
  '/audit': {
    get: {
      tags: ['AuditEntry'],
      summary: 'The audit trail (admin, audit), with the list options of objects',
      parameters: ['limit', 'offset', 'start', 'end', 'order', 'filter'].map((name) => ({
        name,
        in: 'query',
        schema: name === 'order' || name === 'filter' ? { type: 'array', items: str } : str,
      })),
      responses: {
        200: {
          description: 'One ListItem of AuditEntry per line',
          content: { 'application/x-json-lines': { schema: { $ref: '#/components/schemas/ListItem' } } },
        },
        400: err('Bad list parameter'),
        403: err('Not admin or audit'),
      },
    },
  },
  '/prometheus': {
    get: {
      tags: ['Metric'],
      summary: 'Prometheus text exposition (admin, audit); not the Metric collection',
      responses: {
        200: { description: 'text/plain; version=0.0.4', content: { 'text/plain': { schema: str } } },
        403: err('Not admin or audit'),
      },
    },
  },
};
