import {
  err,
  formBody,
  jsonLines,
  LIST_QUERY,
  pathParams,
  type RouteSchema,
  ref,
} from '../core/routeschema.js';

/** The route schemas of src/api/groups.ts: what Fastify checks and /openapi.json describes (docs/groups.md). */

/** The longest reason a membership operation takes (characters). */
export const MAX_REASON = 1024;

const tags = ['Group'];
const membership = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('Membership') } },
});

export const GROUP_REPORT: RouteSchema = {
  tags,
  summary: 'The approvals report of every membership as CSV (admin, audit; docs/groups.md, "Report")',
  response: {
    200: {
      description: 'CSV, one membership per row',
      content: { 'text/csv': { schema: { type: 'string' } } },
    },
    403: err('Not allowed for these credentials'),
  },
};

export const GROUP_CHECK: RouteSchema = {
  tags,
  summary:
    'Is the user an active member of the groups (and, with Next, may they go there)? The proxy’s check',
  // handler: it takes one group as a bare string and "3" as a level, and names Groups (not Groups[i]).
  validatedBy: 'handler',
  body: {
    required: true,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          properties: {
            User: { type: 'string', maxLength: 64 },
            Groups: { type: 'array', items: { type: 'string', maxLength: 64 } },
            Op: { type: 'string', enum: ['and', 'or'] },
            Next: { type: 'string', maxLength: 2048 },
            IntegrityLevel: { type: 'integer', minimum: 0, maximum: 4 },
          },
          required: ['User'],
        },
      },
      ...(formBody(
        {
          user: { type: 'string' },
          group: { type: 'array', items: { type: 'string' } },
          op: { type: 'string' },
          next: { type: 'string' },
          integrity: { type: 'string' },
        },
        ['user'],
      ).content as object),
    },
  },
  response: {
    200: { description: 'The verdict', type: 'object' },
    400: err('A bad field'),
    403: err('Not allowed for these credentials'),
  },
};

export const GROUP_MEMBERS: RouteSchema = {
  tags,
  summary: 'The memberships of a group as JSON lines (its readers: admin, sync, audit, approvers)',
  params: pathParams('id'),
  querystring: LIST_QUERY,
  // handler: a repeated limit, offset, start or end is Bad Request (listquery.ts), not Invalid Field.
  validatedBy: 'handler',
  response: {
    200: jsonLines('One ListItem of Membership per line'),
    403: err('Not a reader of the group'),
    404: err('No such group'),
  },
};

export const USER_GROUPS: RouteSchema = {
  tags,
  summary: 'The memberships of a user as JSON lines',
  params: pathParams('id'),
  querystring: LIST_QUERY,
  // handler: a repeated limit, offset, start or end is Bad Request (listquery.ts), not Invalid Field.
  validatedBy: 'handler',
  response: {
    200: jsonLines('One ListItem of Membership per line'),
    403: err('Not allowed for these credentials'),
    404: err('No such user'),
  },
};

export const MEMBER_GET: RouteSchema = {
  tags,
  summary: 'One membership (the group’s readers, or the member themself)',
  params: pathParams('id', 'user'),
  response: {
    200: membership('The membership'),
    403: err('Not a reader of the group'),
    404: err('No such group, user or membership'),
  },
};

export const MEMBER_HISTORY: RouteSchema = {
  tags,
  summary: 'Every version of a membership, oldest first, as JSON lines (an empty Item: deleted)',
  params: pathParams('id', 'user'),
  response: {
    200: jsonLines('One version per line'),
    403: err('Not a reader of the group'),
    404: err('No such group or user'),
  },
};

const OPERATION_SUMMARIES = {
  add: 'Add a member (admin, sync, approver), or ask to join (oneself)',
  remove: 'Remove a membership',
  activate: 'Activate an approved membership (the member, admin)',
  approve: 'Approve a requested membership',
  reject: 'Reject a membership',
  unreject: 'Take back a rejection (the membership is requested again)',
  use: 'Record a use of an active membership (admin, sync)',
};

/** A lifecycle operation (docs/groups.md, "Lifecycle operations"): an optional reason, the membership back. */
export const memberOpSchema = (op: keyof typeof OPERATION_SUMMARIES): RouteSchema => ({
  tags,
  summary: OPERATION_SUMMARIES[op],
  params: pathParams('id', 'user'),
  validatedBy: 'schema',
  // null (JSON) and no body: no reason. Control characters are refused by the handler (reasonOf).
  body: {
    required: false,
    content: {
      'application/json': {
        schema: {
          type: ['object', 'null'],
          properties: { Reason: { type: ['string', 'null'], maxLength: MAX_REASON } },
          additionalProperties: false,
        },
      },
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object',
          properties: { reason: { type: 'string', maxLength: MAX_REASON } },
          additionalProperties: false,
        },
      },
    },
  },
  response: {
    200: membership('The membership after the operation'),
    ...(op === 'remove' ? { 204: { description: 'Removed' } } : { 201: membership('A new membership') }),
    400: err('A bad reason or body'),
    403: err('No role that may do this operation'),
    404: err('No such group or user'),
    409: err('Not allowed from the current state (header X-Membership-State)'),
  },
});
