import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AuditBatch, AuditEntry, auditEventsOf, listAudit } from '../audit/trail.js';
import { err, type RouteSchema, ref } from '../core/routeschema.js';
import { enforce } from '../policy/decide.js';
import { parseListQuery, type RawListQuery } from '../store/listquery.js';
import type { ServiceContext } from '../store/service.js';
import { auditEntryOf, audited } from './auditentry.js';
import { principalOf } from './objects.js';

/**
 * The audit trail (docs/directory.md): every write request is recorded as it is answered, with who
 * (user, API key, session, agent), from where and the status; GET /audit lists it for admin and
 * audit keys with the list options of objects.
 */
export function registerAuditRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const events = auditEventsOf(ctx);
  const trail = new AuditBatch(ctx.db, events);
  // Before the answer leaves: a client that got its answer finds the entry listed. Most
  // requests are reads that nobody refused: those pass on at once, without a promise; a recorded
  // one answers once its entry is written (the answer waits for the promise returned).
  app.answers.beforeSend((req, reply) => {
    // Writes, and every request the policy refused (reads too: a denial is worth a line).
    const route = req.routeOptions.url;
    if (!audited(req.method, route) && !req.refusedBy) return;
    // Written by the write's own statement, as answered: the trail's stream is woken, that is all.
    const draft = req.auditDraft;
    if (draft?.written && draft.status === reply.statusCode) {
      events.emit('recorded');
      return;
    }
    // The database could not serve the request: its answer does not wait for the entry too (on
    // SQLite under another process's lock that would be a second busy timeout); the entry is
    // written once the database takes it.
    if (reply.statusCode === 503) {
      void record(req, reply);
      return;
    }
    return record(req, reply);
  });
  const record = async (req: FastifyRequest, reply: FastifyReply) => {
    try {
      await trail.record(auditEntryOf(req, reply.statusCode, reply.getHeader('x-id')));
    } catch (err) {
      req.log.error({ err }, 'the audit trail could not record a write');
    }
  };

  app.get<{ Querystring: RawListQuery }>('/audit', { schema: GET_AUDIT }, async (req, reply) => {
    await enforce(ctx, principalOf(req), 'Audit.read', { kind: 'Policy', id: '' });
    const page = await listAudit(ctx.db, parseListQuery(AuditEntry, { ...req.query }));
    if (page.startCursor !== undefined) reply.header('X-Start-Cursor', page.startCursor);
    if (page.endCursor !== undefined) reply.header('X-End-Cursor', page.endCursor);
    reply.header('Cache-Control', 'private, max-age=0');
    return reply.type('application/x-json-lines').send(Readable.from(page.chunks));
  });
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const GET_AUDIT: RouteSchema = {
  tags: ['AuditEntry'],
  summary: 'The audit trail (admin, audit), with the list options of objects',
  querystring: {
    type: 'object',
    properties: {
      limit: { type: 'string' },
      offset: { type: 'string' },
      start: { type: 'string' },
      end: { type: 'string' },
      order: { type: 'array', items: { type: 'string' } },
      filter: { type: 'array', items: { type: 'string' } },
    },
  },
  response: {
    '200': {
      description: 'One ListItem of AuditEntry per line',
      content: { 'application/x-json-lines': { schema: ref('ListItem') } },
    },
    '400': err('Bad list parameter'),
    '403': err('Not admin or audit'),
  },
  // handler: a repeated limit, offset, start or end is Bad Request (listquery.ts), not Invalid Field.
  validatedBy: 'handler',
};
