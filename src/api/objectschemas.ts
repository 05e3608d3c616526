import { err, type Json, LIST_QUERY, pathParams, type RouteSchema, ref } from '../core/routeschema.js';
import type { Field, FieldMap } from '../schema/fields.js';
import { bodyFields, type ObjectType } from '../schema/type.js';

/**
 * The route schemas of the generic object API (src/api/objects.ts), derived from the object
 * registry's declarations like the routes themselves.
 */

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

/** JSON Schema properties of a type's fields (components.schemas.<Kind> of /openapi.json). */
export const propertiesOf = (fields: FieldMap): Json =>
  Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, schemaOf(f)]));

/**
 * The validating schema of one field in a write body (create, PUT, merge patch), as the write
 * path reads a body (src/schema/fields.ts normalize): null stands for the default (or, in a merge
 * patch, removes the value), a read-only field is accepted and ignored, nested objects are closed.
 * The finer checks (timestamps, e-mail addresses, URLs, safe integers, duplicates) stay with
 * normalize, which every writer passes through, not only HTTP.
 */
function writeSchemaOf(field: Field): Json {
  const doc = field.doc ? { description: field.doc } : {};
  if (field.readOnly) return { ...doc, readOnly: true };
  if (field.kind === 'object') return { ...doc, ...writeBodySchema(field.fields) };
  const limits = (f: { maxLength?: number | undefined; enum?: readonly string[] | undefined }) => ({
    ...(f.maxLength !== undefined ? { maxLength: f.maxLength } : {}),
    ...(f.enum ? { enum: f.enum } : {}),
  });
  if (field.kind === 'strings')
    return {
      ...doc,
      type: ['array', 'null'],
      ...(field.maxItems !== undefined ? { maxItems: field.maxItems } : {}),
      items: { type: 'string', ...limits(field) },
    };
  switch (field.kind) {
    case 'boolean':
      return { ...doc, type: ['boolean', 'null'] };
    case 'integer':
    case 'number':
      return {
        ...doc,
        type: [field.kind, 'null'],
        ...(field.min !== undefined ? { minimum: field.min } : {}),
        ...(field.max !== undefined ? { maximum: field.max } : {}),
      };
    case 'timestamp':
      return { ...doc, type: ['string', 'null'], description: `${field.doc ?? ''} (RFC 3339)`.trim() };
    default:
      return {
        ...doc,
        type: ['string', 'null'],
        ...limits(field),
        // The enum's type list admits null; the values must too.
        ...(field.enum ? { enum: [...field.enum, null] } : {}),
      };
  }
}

/** The validating schema of a write body of these fields: a closed object, null for {}. */
export const writeBodySchema = (fields: FieldMap): Json => ({
  type: ['object', 'null'],
  properties: Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, writeSchemaOf(f)])),
  additionalProperties: false,
});

const ETAG_HEADERS = Object.fromEntries(
  ['Etag', 'X-Id', 'Location', 'X-Create-Time', 'Last-Modified'].map((h) => [
    h,
    { schema: { type: 'string' } },
  ]),
);

export interface ObjectRouteSchemas {
  list: RouteSchema;
  create: RouteSchema;
  get: RouteSchema;
  put: RouteSchema;
  patch: RouteSchema;
  delete: RouteSchema;
}

/** 201 Created: the object headers, and for an API key its secret (shown once). */
const createdAnswer = (type: ObjectType): Json => {
  return {
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
};

/** GET /<path>: the type's objects as JSON lines. */
const listSchema = (type: ObjectType): RouteSchema => ({
  tags: [type.kind],
  // handler: a repeated limit, offset, start or end is Bad Request (listquery.ts), not Invalid Field.
  validatedBy: 'handler',
  summary: `List ${type.kind} objects as JSON lines of ListItem`,
  querystring: LIST_QUERY,
  response: {
    200: {
      description: 'One ListItem per line',
      content: { 'application/x-json-lines': { schema: ref('ListItem') } },
    },
    400: err('Bad list parameter'),
  },
});

/** The schema of each operation of a type; `item` adds the id parameter (not for singletons). */
export function objectRouteSchemas(type: ObjectType, item: boolean): ObjectRouteSchemas {
  const tags = [type.kind];
  const params = item ? { params: pathParams('id') } : {};
  // The body as the write path reads it (components.schemas.<Kind> describes the stored object).
  const written = writeBodySchema(bodyFields(type));
  const body = { required: true, content: { 'application/json': { schema: written } } };
  const ifMatch = { type: 'object', properties: { 'If-Match': { type: 'string' } }, required: ['If-Match'] };
  const stored = { description: 'Stored', headers: ETAG_HEADERS };
  return {
    list: listSchema(type),
    create: {
      tags,
      // The schema's refusal is answered where the write path judges the body (src/api/objects.ts).
      validatedBy: 'schema',
      summary: `Create a ${type.kind}`,
      ...params,
      body,
      response: { 201: createdAnswer(type), 400: err('Invalid body'), 409: err('Duplicate') },
    },
    get: {
      tags,
      summary: `Get a ${type.kind}`,
      ...params,
      headers: { type: 'object', properties: { 'If-None-Match': { type: 'string' } } },
      response: {
        200: {
          description: 'The object',
          headers: ETAG_HEADERS,
          content: { 'application/json': { schema: ref(type.kind) } },
        },
        304: { description: 'Not modified' },
        404: err('No such object'),
      },
    },
    put: {
      tags,
      // The handler answers a missing If-Match (404 or 428) before the schema's refusal (src/api/objects.ts).
      validatedBy: 'schema',
      summary: `Replace a ${type.kind}`,
      ...params,
      headers: ifMatch,
      body,
      response: {
        204: stored,
        304: { description: 'Unchanged' },
        404: err('No such object'),
        412: err('Stale If-Match'),
        428: err('If-Match missing'),
      },
    },
    patch: {
      tags,
      // The handler answers a missing If-Match (404 or 428) before the schema's refusal (src/api/objects.ts).
      validatedBy: 'schema',
      summary: `Change some fields of a ${type.kind} (JSON Merge Patch, RFC 7396)`,
      ...params,
      headers: ifMatch,
      body: {
        content: {
          'application/merge-patch+json': { schema: written },
          'application/json': { schema: written },
        },
      },
      response: {
        204: stored,
        304: { description: 'Unchanged' },
        404: err('No such object'),
        409: err('Duplicate, or the last active administrator'),
        412: err('Stale If-Match'),
        428: err('If-Match missing'),
      },
    },
    delete: {
      tags,
      // The handler answers a missing If-Match (404 or 428) before the schema's refusal (src/api/objects.ts).
      validatedBy: 'schema',
      summary: `Delete a ${type.kind}`,
      ...params,
      headers: ifMatch,
      response: {
        204: { description: 'Deleted' },
        404: err('No such object'),
        412: err('Stale If-Match'),
        428: err('If-Match missing'),
      },
    },
  };
}
