import type { FastifyInstance } from 'fastify';
import { factors } from '../auth/factors/index.js';
import { ErrorCodes } from '../core/errors.js';
import { objectTypes } from '../objects/registry.js';
import type { Field, FieldMap } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import type { ServiceContext } from '../store/context.js';
import { DIRECTORY_PATHS } from './directoryopenapi.js';
import { federationPaths } from './openapi-federation.js';
import { VOUCH_PATHS, VOUCH_SCHEMAS } from './openapi-vouch.js';
import { WEBAUTHN_PATHS } from './openapi-webauthn.js';
import { POLICY_OPENAPI_PATHS } from './policy.js';
import { SCRIPT_OPENAPI_PATHS } from './scripts.js';

type Json = Record<string, unknown>;

function schemaOf(field: Field): Json {
  const doc = field.doc ? { description: field.doc } : {};
  const ro = field.readOnly ? { readOnly: true } : {};
  if (field.kind === 'object') {
    return {
      type: 'object',
      ...doc,
      ...ro,
      properties: propertiesOf(field.fields),
      additionalProperties: false,
    };
  }
  if (field.kind === 'strings') {
    return {
      type: 'array',
      ...doc,
      ...ro,
      items: field.enum ? { type: 'string', enum: field.enum } : { type: 'string' },
    };
  }
  const base: Json = { ...doc, ...ro, default: field.default };
  switch (field.kind) {
    case 'boolean':
      return { type: 'boolean', ...base };
    case 'integer':
      return {
        type: 'integer',
        ...base,
        ...(field.min !== undefined ? { minimum: field.min } : {}),
        ...(field.max !== undefined ? { maximum: field.max } : {}),
      };
    case 'number':
      return { type: 'number', ...base };
    case 'timestamp':
      return { type: 'string', format: 'date-time', ...base };
    default:
      return {
        type: 'string',
        ...base,
        ...(field.enum ? { enum: field.enum } : {}),
        ...(field.maxLength !== undefined ? { maxLength: field.maxLength } : {}),
      };
  }
}

const propertiesOf = (fields: FieldMap): Json =>
  Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, schemaOf(f)]));

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('Error') } },
});
const ETAG_HEADERS = Object.fromEntries(
  ['Etag', 'X-Id', 'Location', 'X-Create-Time', 'Last-Modified'].map((h) => [
    h,
    { schema: { type: 'string' } },
  ]),
);

function pathsOf(type: ObjectType): Record<string, Json> {
  const has = (op: string) => (type.ops as readonly string[]).includes(op);
  const body = {
    required: true,
    content: {
      'application/json': {
        schema: type.writeOnly
          ? { allOf: [ref(type.kind), { type: 'object', properties: propertiesOf(type.writeOnly) }] }
          : ref(type.kind),
      },
    },
  };
  const object = {
    description: 'The object',
    headers: ETAG_HEADERS,
    content: { 'application/json': { schema: ref(type.kind) } },
  };
  const ifMatch = { name: 'If-Match', in: 'header', required: true, schema: { type: 'string' } };
  const tags = [type.kind];
  const item: Json = {};
  const collection: Json = {};
  if (has('list')) {
    collection.get = {
      tags,
      summary: `List ${type.kind} objects as JSON lines of ListItem`,
      parameters: ['limit', 'offset', 'start', 'end', 'order', 'filter'].map((name) => ({
        name,
        in: 'query',
        schema:
          name === 'order' || name === 'filter'
            ? { type: 'array', items: { type: 'string' } }
            : { type: 'string' },
        ...(name === 'order' || name === 'filter' ? { explode: true } : {}),
      })),
      responses: {
        200: {
          description: 'One ListItem per line',
          content: { 'application/x-json-lines': { schema: ref('ListItem') } },
        },
        400: error('Bad list parameter'),
      },
    };
  }
  const created = {
    description: 'Created',
    headers: ETAG_HEADERS,
    ...(type.kind === 'APIKey'
      ? {
          content: {
            'application/json': {
              schema: {
                allOf: [ref('APIKey'), { type: 'object', properties: { Secret: { type: 'string' } } }],
              },
            },
          },
        }
      : {}),
  };
  const createOp = {
    tags,
    summary: `Create a ${type.kind}`,
    requestBody: body,
    responses: { 201: created, 400: error('Invalid body'), 409: error('Duplicate') },
  };
  if (has('create') && type.identity === 'generated') collection.post = createOp;
  if (has('create') && type.identity === 'named') item.post = createOp;
  if (has('get')) {
    item.get = {
      tags,
      summary: `Get a ${type.kind}`,
      parameters: [{ name: 'If-None-Match', in: 'header', schema: { type: 'string' } }],
      responses: { 200: object, 304: { description: 'Not modified' }, 404: error('No such object') },
    };
  }
  if (has('update')) {
    item.put = {
      tags,
      summary: `Replace a ${type.kind}`,
      parameters: [ifMatch],
      requestBody: body,
      responses: {
        204: { description: 'Stored', headers: ETAG_HEADERS },
        304: { description: 'Unchanged' },
        404: error('No such object'),
        412: error('Stale If-Match'),
        428: error('If-Match missing'),
      },
    };
  }
  if (has('update')) {
    item.patch = {
      tags,
      summary: `Change some fields of a ${type.kind} (JSON Merge Patch, RFC 7396)`,
      parameters: [ifMatch],
      requestBody: {
        content: {
          'application/merge-patch+json': { schema: { type: 'object' } },
          'application/json': { schema: { type: 'object' } },
        },
      },
      responses: {
        204: { description: 'Stored', headers: ETAG_HEADERS },
        304: { description: 'Unchanged' },
        404: error('No such object'),
        409: error('Duplicate, or the last active administrator'),
        412: error('Stale If-Match'),
        428: error('If-Match missing'),
      },
    };
  }
  if (has('delete')) {
    item.delete = {
      tags,
      summary: `Delete a ${type.kind}`,
      parameters: [ifMatch],
      responses: {
        204: { description: 'Deleted' },
        404: error('No such object'),
        412: error('Stale If-Match'),
        428: error('If-Match missing'),
      },
    };
  }
  if (type.identity === 'singleton') return { [`/${type.path}`]: item };
  const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
  const out: Record<string, Json> = {};
  if (Object.keys(collection).length > 0) out[`/${type.path}`] = collection;
  if (Object.keys(item).length > 0) out[`/${type.path}/{id}`] = { parameters: [idParam], ...item };
  return out;
}

/** The OpenAPI 3.1 description of the object API, generated from the same declarations as the API itself. */
export function openApiDocument(): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Gatehouse API',
      version: 'v1',
      description:
        'Generic object API. Sign-in, events, groups and the proxy back channel are described in docs/.',
    },
    security: [{ bearer: [] }, { accessToken: [] }],
    paths: Object.assign(
      {},
      ...objectTypes.map(pathsOf),
      VOUCH_PATHS,
      DIRECTORY_PATHS,
      SCRIPT_OPENAPI_PATHS,
      POLICY_OPENAPI_PATHS,
      ...factors.map((f) => f.paths ?? {}),
      WEBAUTHN_PATHS,
      federationPaths,
    ),
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key: gv followed by 54 letters and digits',
        },
        accessToken: { type: 'apiKey', in: 'query', name: 'access_token' },
        session: { type: 'apiKey', in: 'cookie', name: 'gatehouse_session' },
        proxyToken: {
          type: 'http',
          scheme: 'bearer',
          description: "An App's proxy token (POST /apps/:id/proxytoken)",
        },
      },
      schemas: {
        ...Object.fromEntries(
          objectTypes.map((t) => [
            t.kind,
            { type: 'object', properties: propertiesOf(t.fields), additionalProperties: false },
          ]),
        ),
        ...VOUCH_SCHEMAS,
        ListItem: {
          type: 'object',
          properties: {
            ID: { type: 'string' },
            Item: { type: 'object' },
            StatusCode: { type: 'integer' },
            StatusText: { type: 'string' },
          },
        },
        Error: {
          type: 'object',
          required: ['Status', 'Code', 'Message'],
          properties: {
            Status: { type: 'integer' },
            Code: { type: 'string', enum: [...new Set(Object.values(ErrorCodes).map((e) => e.code))] },
            Message: { type: 'string' },
            Field: { type: 'string' },
            RequestID: { type: 'string' },
          },
        },
      },
    },
  };
}

export function registerOpenApiRoutes(app: FastifyInstance, _ctx: ServiceContext) {
  const text = JSON.stringify(openApiDocument());
  app.get('/openapi.json', { config: { auth: 'none' } }, async (_req, reply) =>
    reply.type('application/json').send(text),
  );
}
