import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  access,
  checkFieldRules,
  checkPrivilegedObject,
  FIELD_RULES,
  PRIVILEGE_OF,
  type PrivilegeLookup,
} from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { ApiError } from '../core/errors.js';
import { APIKey } from '../objects/apikey.js';
import { objectTypes } from '../objects/registry.js';
import { TENANT_ID } from '../objects/tenant.js';
import { type Doc, defaultOf, normalize, refuseFractionalSeconds } from '../schema/fields.js';
import type { Access, ObjectType, Op } from '../schema/type.js';
import type { ServiceContext } from '../store/context.js';
import { parseListQuery, type RawListQuery } from '../store/listquery.js';
import type { StoredObject } from '../store/objects.js';
import { etagMatches } from '../store/objects.js';
import { setObjectHeaders, singleHeader } from './http.js';
import { afterObjectWrite, beforeObjectWrite } from './scripts.js';

type IdParams = { id: string };

/** The principal resolved by the authentication hook; every object route requires one. */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError('Unauthenticated', 'authentication required');
  return req.principal;
}

/** Checks the matrix; returns the access granted or throws 403. */
export function authorize(req: FastifyRequest, type: ObjectType, op: Op): Access {
  const a = access(principalOf(req), type.kind, op);
  if (!a) throw new ApiError('Forbidden', `your credentials may not ${op} ${type.kind} objects`);
  return a;
}

/** With 'own' access, an object that is not the caller's is reported as missing (no existence leak). */
function checkOwner(req: FastifyRequest, type: ObjectType, a: Access, doc: Doc, id: string) {
  if (a === 'all') return;
  if (!type.ownerField || doc[type.ownerField] !== principalOf(req).userId) {
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
    if (type.ops.includes('update')) methods.push('PUT');
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

/** Registers list, create, get, update and delete for every type, as its ops allow. */
export function registerObjectRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;
  const lookup: PrivilegeLookup = {
    async keysOf(userId) {
      const page = await store.list(
        APIKey,
        parseListQuery(APIKey, { filter: `UserID = ${JSON.stringify(userId)}` }),
      );
      const keys: Doc[] = [];
      for await (const chunk of page.chunks)
        for (const line of chunk.split('\n')) if (line !== '') keys.push(JSON.parse(line).Item as Doc);
      return keys;
    },
  };
  for (const type of objectTypes) {
    const has = (op: Op) => type.ops.includes(op);
    const collection = `/${type.path}`;

    const rules = FIELD_RULES[type.kind];
    const writable = type.writeOnly ? { ...type.fields, ...type.writeOnly } : type.fields;
    const defaults: Doc = Object.fromEntries(Object.entries(type.fields).map(([k, f]) => [k, defaultOf(f)]));

    /** The privilege-bearing fields of the body as they would be stored (403 naming one not allowed). */
    const checkFields = (req: FastifyRequest, previous: Doc | undefined) => {
      const p = principalOf(req);
      if (!rules || p.scopes.has('admin')) return;
      checkFieldRules(p, type.kind, normalize(writable, req.body ?? {}, previous), previous, defaults);
    };

    /**
     * Before a change or deletion: with own-only access the object must be the caller's, and the
     * object must not stand for privileges the caller lacks. Returns the ETag to write against: the
     * one checked here, so the write fails (412) if the object changed after the checks.
     */
    const checkExisting = async (req: FastifyRequest, a: Access, id: string, ifMatch: string, op: Op) => {
      // Nothing to check for an administrator, or on a type without rules: no extra read.
      const unguarded = !rules && !PRIVILEGE_OF[type.kind];
      if (a === 'all' && (principalOf(req).scopes.has('admin') || unguarded)) return ifMatch;
      const existing = await store.get(type, id);
      if (!existing) {
        if (a === 'own') throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
        return ifMatch; // the store answers 404
      }
      checkOwner(req, type, a, existing.doc, id);
      if (!etagMatches(ifMatch, existing.etag, false)) return ifMatch; // the store answers 412
      await checkPrivilegedObject(principalOf(req), type.kind, id, existing.doc, op, lookup);
      if (op === 'update') checkFields(req, existing.doc);
      return existing.etag;
    };

    const get = async (req: FastifyRequest, reply: FastifyReply, id: string) => {
      const a = authorize(req, type, 'get');
      const obj = await store.get(type, id);
      if (!obj) throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
      checkOwner(req, type, a, obj.doc, id);
      return sendObject(req, reply, type, obj);
    };

    /**
     * The If-Match of a PUT or DELETE. Without one, a missing object (or, with own-only access,
     * someone else's) answers 404 first, as the spec orders it; only an existing one answers 428.
     */
    const requireIfMatch = async (req: FastifyRequest, a: Access, id: string) => {
      const v = singleHeader(req.headers['if-match']);
      if (v === undefined || v.trim() === '') {
        const existing = await store.get(type, id);
        if (!existing) throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
        checkOwner(req, type, a, existing.doc, id);
      }
      return ifMatchOf(req);
    };

    const update = async (req: FastifyRequest, reply: FastifyReply, id: string) => {
      const a = authorize(req, type, 'update');
      const ifMatch = await checkExisting(req, a, id, await requireIfMatch(req, a, id), 'update');
      refuseFractionalSeconds(writable, req.body);
      // The fields a script sets pass the same field rules as the caller's own.
      if (await beforeObjectWrite(ctx, req, type, id)) checkFields(req, (await store.get(type, id))?.doc);
      const { obj, changed } = await store.update(type, id, req.body ?? {}, ifMatch, {
        userId: principalOf(req).userId,
      });
      if (changed) await afterObjectWrite(ctx, type, obj, false);
      setObjectHeaders(reply, type, obj);
      return reply.code(changed ? 204 : 304).send();
    };

    const create = async (req: FastifyRequest, reply: FastifyReply, id?: string) => {
      authorize(req, type, 'create');
      if (id !== undefined && type.checkName) {
        const bad = type.checkName(id);
        if (bad) throw new ApiError('BadRequest', `the name ${JSON.stringify(id)} ${bad}`, { field: 'id' });
      }
      await beforeObjectWrite(ctx, req, type, undefined);
      checkFields(req, undefined);
      refuseFractionalSeconds(writable, req.body);
      const { obj, response } = await store.create(type, req.body ?? {}, id, {
        userId: principalOf(req).userId,
      });
      await afterObjectWrite(ctx, type, obj, true);
      setObjectHeaders(reply, type, obj);
      reply.code(201);
      if (response) return reply.type('application/json').send(JSON.stringify({ ...obj.doc, ...response }));
      return reply.send();
    };

    const remove = async (req: FastifyRequest, reply: FastifyReply, id: string) => {
      const a = authorize(req, type, 'delete');
      const ifMatch = await checkExisting(req, a, id, await requireIfMatch(req, a, id), 'delete');
      await store.delete(type, id, ifMatch);
      return reply.code(204).send();
    };

    if (type.identity === 'singleton') {
      app.get(collection, (req, reply) => get(req, reply, TENANT_ID));
      app.put(collection, (req, reply) => update(req, reply, TENANT_ID));
      app.route({
        method: ['POST', 'DELETE', 'PATCH'],
        url: collection,
        handler: () => notAllowed(type, true),
      });
      continue;
    }

    app.get<{ Querystring: RawListQuery }>(collection, async (req, reply) => {
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
      const page = await store.list(type, parseListQuery(type, raw));
      if (page.startCursor !== undefined) reply.header('X-Start-Cursor', page.startCursor);
      if (page.endCursor !== undefined) reply.header('X-End-Cursor', page.endCursor);
      reply.header('Cache-Control', 'private, max-age=0');
      return reply.type('application/x-json-lines').send(Readable.from(page.chunks));
    });
    app.post(collection, (req, reply) =>
      type.identity === 'generated' && has('create') ? create(req, reply) : notAllowed(type, false),
    );
    app.route({
      method: ['PUT', 'DELETE', 'PATCH'],
      url: collection,
      handler: () => notAllowed(type, false),
    });

    const item = `${collection}/:id`;
    app.get<{ Params: IdParams }>(item, (req, reply) =>
      has('get') ? get(req, reply, req.params.id) : notAllowed(type, true),
    );
    app.put<{ Params: IdParams }>(item, (req, reply) =>
      has('update') ? update(req, reply, req.params.id) : notAllowed(type, true),
    );
    app.delete<{ Params: IdParams }>(item, (req, reply) =>
      has('delete') ? remove(req, reply, req.params.id) : notAllowed(type, true),
    );
    app.post<{ Params: IdParams }>(item, (req, reply) =>
      type.identity === 'named' && has('create') ? create(req, reply, req.params.id) : notAllowed(type, true),
    );
    app.route({ method: 'PATCH', url: item, handler: () => notAllowed(type, true) });
  }
}

const toArray = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v : [v];
