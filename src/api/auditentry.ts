import type { FastifyRequest } from 'fastify';
import { type AuditRecord, auditRowOf } from '../audit/trail.js';
import { typeByPath } from '../objects/registry.js';
import type { AuditRowFor } from '../store/auditrow.js';
import { BACKCHANNEL, PROXY_TOKEN_PATTERN } from '../wire/proxy.js';

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Write requests that are lookups, not changes: the sign-in state check and the proxy's per-request checks. */
export function audited(method: string, route: string | undefined): boolean {
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

/** The audit entry of a request answered `status` (`created`: a creation's new object's ID). */
export function auditEntryOf(
  req: FastifyRequest,
  status: number,
  created: unknown,
): Omit<AuditRecord, 'ID' | 'Time' | 'TimeMs'> {
  const route = req.routeOptions.url;
  const p = req.principal;
  const agent = agentApp(req, status);
  const ua = req.headers['user-agent'];
  return {
    Method: req.method,
    Route: route ?? '',
    Path: req.url.split('?')[0]?.slice(0, 2048) ?? '',
    Kind: typeByPath.get(route?.split('/')[1] ?? '')?.kind ?? '',
    ObjectID: objectIdOf((req.params ?? {}) as Record<string, unknown>, created),
    Rule: req.refusedBy ?? '',
    Status: status,
    Via: p ? p.via : agent ? 'agent' : 'none',
    UserID: p?.userId ?? '',
    KeyID: p?.keyId ?? '',
    SessionID: p?.sessionId ?? '',
    AgentAppID: agent,
    Address: req.ip,
    UserAgent: typeof ua === 'string' ? ua.slice(0, 256) : '',
    RequestID: String(req.id),
  };
}

/**
 * The audit entry of an object write, drafted before the write for the status its route answers
 * when the write is made: the write's own statement inserts it (src/store/auditrow.ts), so the
 * trail costs no round trip and no commit of its own. The route marks the draft `written` once
 * the store wrote; the answer hook (src/api/audit.ts) then records nothing more, unless the answer
 * turned out otherwise (an error after the write): that answer gets an entry of its own as well.
 */
export class AuditDraft {
  written = false;
  constructor(
    private readonly req: FastifyRequest,
    readonly status: number,
  ) {}

  readonly rowFor: AuditRowFor = (objectId) => auditRowOf(auditEntryOf(this.req, this.status, objectId));
}

/** A draft for an object write the trail records, answered `status` when written (else undefined). */
export function draftAudit(req: FastifyRequest, status: number): AuditDraft | undefined {
  if (!audited(req.method, req.routeOptions.url)) return undefined;
  const draft = new AuditDraft(req, status);
  req.auditDraft = draft;
  return draft;
}
