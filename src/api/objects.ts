import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import { ApiError } from '../core/errors.js';
import { NOT_AN_OPERATION, type RouteSchema } from '../core/routeschema.js';
import { objectTypes } from '../objects/registry.js';
import { TENANT_ID } from '../objects/tenant.js';
import { access } from '../policy/grants.js';
import type { Access, ObjectType, Op } from '../schema/type.js';
import { parseListQuery, type RawListQuery } from '../store/listquery.js';
import type { StoredObject } from '../store/objects.js';
import { etagMatches } from '../store/objects.js';
import { type ServiceContext, writerOf } from '../store/service.js';
import { draftAudit } from './auditentry.js';
import { setObjectHeaders, singleHeader } from './http.js';
import { objectRouteSchemas } from './objectschemas.js';
import { heldBackRefusal } from './validation.js';

type IdParams = { id: string };

/** The principal resolved by the authentication hook; every object route requires one. */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError('Unauthenticated', 'authentication required');
  return req.principal;
}

/** Checks the matrix; returns the access granted or throws 403. */
export function authorize(req: FastifyRequest, type: ObjectType, op: Op): Access {
  const a = access(principalOf(req), type.kind, op);
  if (!a)
    throw new ApiError('Forbidden', `your credentials may not ${op} ${type.kind} objects`, {
      rule: 'grant.scope',
    });
  return a;
}

/** With 'own' access, an object that is not the caller's is reported as missing (no existence leak). */
function checkOwner(req: FastifyRequest, type: ObjectType, a: Access, obj: StoredObject, id: string) {
  if (a === 'all') return;
  // Only here is the document parsed: an answer to a caller who may read all sends the stored text.
  if (!type.ownerField || obj.doc[type.ownerField] !== principalOf(req).userId) {
    throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
  }
}

function ifMatchOf(req: FastifyRequest): string {
  const v = singleHeader(req.headers['if-match']);
  if (v === undefined || v.trim() === '') {
    throw new ApiError('PreconditionRequired', 'If-Match is required: send the Etag from a previous GET', {
      field: 'If-Match',
    });
  }
  return v;
}

/** Sends a stored object as a Get response, honouring If-None-Match. */
export function sendObject(req: FastifyRequest, reply: FastifyReply, type: ObjectType, obj: StoredObject) {
  setObjectHeaders(reply, type, obj);
  const inm = singleHeader(req.headers['if-none-match']);
  if (inm !== undefined && etagMatches(inm, obj.etag, true)) return reply.code(304).send();
  return reply.code(200).type('application/json').send(obj.data);
}

const allowOf = (type: ObjectType, item: boolean) => {
  const methods: string[] = [];
  if (item || type.identity === 'singleton') {
    if (type.ops.includes('get')) methods.push('GET', 'HEAD');
    if (type.identity === 'named' && type.ops.includes('create')) methods.push('POST');
    if (type.ops.includes('update')) methods.push('PUT', 'PATCH');
    if (type.ops.includes('delete')) methods.push('DELETE');
  } else {
    if (type.ops.includes('list')) methods.push('GET', 'HEAD');
    if (type.identity === 'generated' && type.ops.includes('create')) methods.push('POST');
  }
  return methods.join(', ');
};

function notAllowed(type: ObjectType, item: boolean): never {
  throw new ApiError('MethodNotAllowed', `${type.kind} does not support this method here`, {
    headers: { Allow: allowOf(type, item) },
  });
}

/**
 * Route options of a write: its schema, validated with the refusal held back, because the spec
 * orders other answers first: 403 for a caller who may not write the type, 404 for a missing
 * object, 428 for a missing If-Match. The write path throws it where it judges the body
 * (WriteRequest.refusal, src/writes/path.ts).
 */
const writeRoute = (schema: RouteSchema) => ({ schema, attachValidation: true });

/** JSON Merge Patch bodies (RFC 7396) are JSON. */
const MERGE_PATCH = 'application/merge-patch+json';

type Handlers = ReturnType<typeof objectHandlers>;

/** The body of a route that only answers 405 (the type lacks the method): not an operation. */
const notAllowedRoute = (type: ObjectType, item: boolean) => ({
  schema: NOT_AN_OPERATION,
  handler: () => notAllowed(type, item),
});

/**
 * Registers list, create, get, update (PUT, and PATCH with a JSON Merge Patch) and delete for every
 * type, as its ops allow. Reads are answered here; every write goes to the one write path
 * (src/writes/path.ts), which decides, applies the rules and hooks, and stores.
 */
export function registerObjectRoutes(app: FastifyInstance, ctx: ServiceContext) {
  if (!app.hasContentTypeParser(MERGE_PATCH))
    app.addContentTypeParser(MERGE_PATCH, { parseAs: 'string' }, (req, body, done) =>
      app.getDefaultJsonParser('error', 'error')(req, String(body), done),
    );
  for (const type of objectTypes) {
    const handlers = objectHandlers(ctx, type);
    if (type.identity === 'singleton') registerSingletonRoutes(app, type, handlers);
    else {
      registerCollectionRoutes(app, ctx, type, handlers);
      registerItemRoutes(app, type, handlers);
    }
  }
}

/** Get, update, create and delete of one type, for the routes below. */
function objectHandlers(ctx: ServiceContext, type: ObjectType) {
  const { store } = ctx;
  const writes = writerOf(ctx);

  const get = async (req: FastifyRequest, reply: FastifyReply, id: string) => {
    const a = authorize(req, type, 'get');
    const obj = await store.get(type, id);
    if (!obj) throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
    checkOwner(req, type, a, obj, id);
    return sendObject(req, reply, type, obj);
  };

  /**
   * The If-Match of a PUT, PATCH or DELETE. Without one, a missing object (or, with own-only
   * access, someone else's) answers 404 first, as the spec orders it; only an existing one 428.
   */
  const requireIfMatch = async (req: FastifyRequest, op: Op, id: string) => {
    const v = singleHeader(req.headers['if-match']);
    if (v === undefined || v.trim() === '') {
      const a = authorize(req, type, op);
      const existing = await store.get(type, id);
      if (!existing) throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
      checkOwner(req, type, a, existing, id);
    }
    return ifMatchOf(req);
  };

  const update = async (req: FastifyRequest, reply: FastifyReply, id: string, patch: boolean) => {
    const ifMatch = await requireIfMatch(req, 'update', id);
    const audit = draftAudit(req, 204);
    const { obj, changed } = await writes.write({
      actor: principalOf(req),
      type,
      op: patch ? 'patch' : 'update',
      id,
      body: req.body,
      ifMatch,
      refusal: heldBackRefusal(req),
      auditRow: audit?.rowFor,
    });
    // Unchanged: nothing was written, so neither was the entry (the answer hook records the 304).
    if (audit) audit.written = changed;
    if (obj) setObjectHeaders(reply, type, obj);
    return reply.code(changed ? 204 : 304).send();
  };

  const create = async (req: FastifyRequest, reply: FastifyReply, id?: string) => {
    authorize(req, type, 'create');
    if (id !== undefined && type.checkName) {
      const bad = type.checkName(id);
      if (bad) throw new ApiError('BadRequest', `the name ${JSON.stringify(id)} ${bad}`, { field: 'id' });
    }
    const audit = draftAudit(req, 201);
    const { obj, response } = await writes.write({
      actor: principalOf(req),
      type,
      op: 'create',
      id,
      body: req.body,
      refusal: heldBackRefusal(req),
      auditRow: audit?.rowFor,
    });
    if (!obj) throw new ApiError('Internal', 'the write stored nothing');
    if (audit) audit.written = true;
    setObjectHeaders(reply, type, obj);
    reply.code(201);
    if (response) return reply.type('application/json').send(JSON.stringify({ ...obj.doc, ...response }));
    return reply.send();
  };

  const remove = async (req: FastifyRequest, reply: FastifyReply, id: string) => {
    const ifMatch = await requireIfMatch(req, 'delete', id);
    const refusal = heldBackRefusal(req);
    if (refusal) throw refusal;
    const audit = draftAudit(req, 204);
    await writes.write({ actor: principalOf(req), type, op: 'delete', id, ifMatch, auditRow: audit?.rowFor });
    if (audit) audit.written = true;
    return reply.code(204).send();
  };
  return { get, update, create, remove };
}

/** The tenant: one object at /<path>, read and updated, never created nor deleted. */
function registerSingletonRoutes(app: FastifyInstance, type: ObjectType, h: Handlers) {
  const path = `/${type.path}`;
  const schemas = objectRouteSchemas(type, false);
  const has = (op: Op) => type.ops.includes(op);
  const or405 = (op: Op, schema: RouteSchema) => (has(op) ? schema : NOT_AN_OPERATION);
  app.get(path, { schema: or405('get', schemas.get) }, (req, reply) => h.get(req, reply, TENANT_ID));
  app.put(path, writeRoute(or405('update', schemas.put)), (req, reply) =>
    h.update(req, reply, TENANT_ID, false),
  );
  app.patch(path, writeRoute(or405('update', schemas.patch)), (req, reply) =>
    h.update(req, reply, TENANT_ID, true),
  );
  app.route({ method: ['POST', 'DELETE'], url: path, ...notAllowedRoute(type, true) });
}

/** /<path>: list and, for types with generated ids, create. */
function registerCollectionRoutes(app: FastifyInstance, ctx: ServiceContext, type: ObjectType, h: Handlers) {
  const collection = `/${type.path}`;
  const schemas = objectRouteSchemas(type, false);
  const has = (op: Op) => type.ops.includes(op);
  app.get<{ Querystring: RawListQuery }>(
    collection,
    { schema: has('list') ? schemas.list : NOT_AN_OPERATION },
    async (req, reply) => {
      if (!has('list')) notAllowed(type, false);
      const a = authorize(req, type, 'list');
      const raw = { ...req.query };
      if (a === 'own' && type.ownerField) {
        // Own-only access lists just the caller's objects: an implicit filter on the owner field.
        raw.filter = [
          ...toArray(raw.filter),
          `${type.ownerField} = ${JSON.stringify(principalOf(req).userId)}`,
        ];
      }
      const page = await ctx.store.list(type, parseListQuery(type, raw));
      if (page.startCursor !== undefined) reply.header('X-Start-Cursor', page.startCursor);
      if (page.endCursor !== undefined) reply.header('X-End-Cursor', page.endCursor);
      reply.header('Cache-Control', 'private, max-age=0');
      return reply.type('application/x-json-lines').send(Readable.from(page.chunks));
    },
  );
  const creates = type.identity === 'generated' && has('create');
  app.post(collection, writeRoute(creates ? schemas.create : NOT_AN_OPERATION), (req, reply) =>
    creates ? h.create(req, reply) : notAllowed(type, false),
  );
  app.route({ method: ['PUT', 'DELETE', 'PATCH'], url: collection, ...notAllowedRoute(type, false) });
}

/** /<path>/:id: get, replace, patch, delete and, for named types, create. */
function registerItemRoutes(app: FastifyInstance, type: ObjectType, h: Handlers) {
  const item = `/${type.path}/:id`;
  const schemas = objectRouteSchemas(type, true);
  const has = (op: Op) => type.ops.includes(op);
  const or405 = (op: Op, schema: RouteSchema) => (has(op) ? schema : NOT_AN_OPERATION);
  const creates = type.identity === 'named' && has('create');
  app.get<{ Params: IdParams }>(item, { schema: or405('get', schemas.get) }, (req, reply) =>
    has('get') ? h.get(req, reply, req.params.id) : notAllowed(type, true),
  );
  app.put<{ Params: IdParams }>(item, writeRoute(or405('update', schemas.put)), (req, reply) =>
    has('update') ? h.update(req, reply, req.params.id, false) : notAllowed(type, true),
  );
  app.patch<{ Params: IdParams }>(item, writeRoute(or405('update', schemas.patch)), (req, reply) =>
    has('update') ? h.update(req, reply, req.params.id, true) : notAllowed(type, true),
  );
  app.delete<{ Params: IdParams }>(item, writeRoute(or405('delete', schemas.delete)), (req, reply) =>
    has('delete') ? h.remove(req, reply, req.params.id) : notAllowed(type, true),
  );
  app.post<{ Params: IdParams }>(
    item,
    writeRoute(creates ? schemas.create : NOT_AN_OPERATION),
    (req, reply) => (creates ? h.create(req, reply, req.params.id) : notAllowed(type, true)),
  );
}

const toArray = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v : [v];
