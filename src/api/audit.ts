import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AuditBatch, AuditEntry, auditEventsOf, listAudit } from '../audit/trail.js';
import { err, type RouteSchema, ref } from '../core/routeschema.js';
import { typeByPath } from '../objects/registry.js';
import { enforce } from '../policy/decide.js';
import { parseListQuery, type RawListQuery } from '../store/listquery.js';
import type { ServiceContext } from '../store/service.js';
import { BACKCHANNEL, PROXY_TOKEN_PATTERN } from '../wire/proxy.js';
import { principalOf } from './objects.js';

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Write requests that are lookups, not changes: the sign-in state check and the proxy's per-request checks. */
function audited(method: string, route: string | undefined): boolean {
  if (READS.has(method)) return false;
  // No route: nothing was written (an unknown path answers 404 before any credential is read).
  if (route === undefined) return false;
  if (route === '/auth') return false;
  if (route?.startsWith(`${BACKCHANNEL}/`) && route !== `${BACKCHANNEL}/register`) return false;
  return true;
}

/** The :id of the route, or for a create the new object's (its X-Id), so the trail names what was made. */
function objectIdOf(params: Record<string, unknown>, created: unknown): string {
  if (typeof params.id === 'string') return params.id.slice(0, 256);
  return typeof created === 'string' ? created.slice(0, 256) : '';
}

/** An App's proxy token that the route accepted (2xx/3xx): the agent or proxy that wrote. */
function agentApp(req: FastifyRequest, status: number): string {
  if (status >= 400 || req.principal) return '';
  const m = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''));
  return PROXY_TOKEN_PATTERN.exec(m?.[1] ?? '')?.[1] ?? '';
}

/**
 * The audit trail (docs/directory.md): every write request is recorded as it is answered, with who
 * (user, API key, session, agent), from where and the status; GET /audit lists it for admin and
 * audit keys with the list options of objects.
 */
export function registerAuditRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const trail = new AuditBatch(ctx.db, auditEventsOf(ctx));
  // Before the answer leaves: a client that got its answer finds the entry listed. Most
  // requests are reads that nobody refused: those pass on at once, without a promise; a recorded
  // one answers once its entry is written (the answer waits for the promise returned).
  app.answers.beforeSend((req, reply) => {
    // Writes, and every request the policy refused (reads too: a denial is worth a line).
    const route = req.routeOptions.url;
    if (!audited(req.method, route) && !req.refusedBy) return;
    return record(req, reply, route);
  });
  const record = async (req: FastifyRequest, reply: FastifyReply, route: string | undefined) => {
    const p = req.principal;
    const agent = agentApp(req, reply.statusCode);
    const params = (req.params ?? {}) as Record<string, unknown>;
    const ua = req.headers['user-agent'];
    try {
      await trail.record({
        Method: req.method,
        Route: route ?? '',
        Path: req.url.split('?')[0]?.slice(0, 2048) ?? '',
        Kind: typeByPath.get(route?.split('/')[1] ?? '')?.kind ?? '',
        ObjectID: objectIdOf(params, reply.getHeader('x-id')),
        Rule: req.refusedBy ?? '',
        Status: reply.statusCode,
        Via: p ? p.via : agent ? 'agent' : 'none',
        UserID: p?.userId ?? '',
        KeyID: p?.keyId ?? '',
        SessionID: p?.sessionId ?? '',
        AgentAppID: agent,
        Address: req.ip,
        UserAgent: typeof ua === 'string' ? ua.slice(0, 256) : '',
        RequestID: String(req.id),
      });
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
