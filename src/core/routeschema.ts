/**
 * The pieces every route schema is built from. A route declares a Fastify schema (params,
 * querystring, headers, body, response, plus summary, description, tags, operationId, security);
 * Fastify checks requests against it and src/api/openapi.ts walks the registered routes to write
 * /openapi.json. Defined here, at the bottom layer, so the routes of every layer (api, factors)
 * build their schemas from the same helpers.
 */
export type Json = Record<string, unknown>;

/** A Fastify route schema with the OpenAPI fields Fastify ignores and /openapi.json reads. */
export interface RouteSchema {
  summary?: string;
  description?: string;
  tags?: readonly string[];
  operationId?: string;
  security?: readonly Json[];
  deprecated?: boolean;
  /**
   * 'schema': Fastify refuses a request the schema does not admit, with the answer the handler's
   * own check would give (src/api/validation.ts); a body is taken as sent (no coercion, no
   * defaults, unknown fields refused). 'handler': the handler checks the request itself (a
   * comment at the route says why the schema cannot), so this schema only documents it. Neither:
   * the schema validates, but defaults are filled in and unknown fields of a closed object dropped
   * (src/api/validation.ts requestValidators).
   */
  validatedBy?: 'schema' | 'handler';
  /** Not an operation: a stand-in that answers 405 for a method the type lacks (left out of the document). */
  hide?: boolean;
  params?: Json;
  querystring?: Json;
  headers?: Json;
  /** A JSON Schema of a JSON body, or `{ required?, description?, content: { <media type>: { schema } } }`. */
  body?: Json;
  /** Per status: a JSON Schema of a JSON answer with a description, or `{ description, headers?, content? }`. */
  response?: Record<string | number, Json>;
}

/** A reference to a named schema of the document (components.schemas). */
export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

/** An error answer: the one JSON error shape of every endpoint (src/core/errors.ts). */
export const err = (description: string): Json => ({
  description,
  content: { 'application/json': { schema: ref('Error') } },
});

/** An answer that is a JSON object with these properties. */
export const jsonObject = (description: string, properties: Json, required?: string[]): Json => ({
  description,
  content: {
    'application/json': {
      schema: { type: 'object', properties, ...(required ? { required } : {}) },
    },
  },
});

/** A body of form fields (application/x-www-form-urlencoded). */
export const formBody = (
  properties: Json,
  required: string[] = [],
  isRequired = required.length > 0,
): Json => ({
  required: isRequired,
  content: {
    'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } },
  },
});

/** Path parameters, each a string. */
export const pathParams = (...names: string[]): Json => ({
  type: 'object',
  properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])),
  required: names,
});

/** Query parameters: each property a parameter of the query string. */
export const queryOf = (properties: Json, required?: string[]): Json => ({
  type: 'object',
  properties,
  ...(required ? { required } : {}),
});

/** `?user=<ID>`: an administrator acting on another user's factors (the caller's own without it). */
export const USER_QUERY: Json = queryOf({ user: { type: 'string' } });

export const NO_CONTENT = (description: string): Json => ({ description });

/** The list options of every JSON-lines list (docs/api.md, "Lists"), checked by the list parser. */
export const LIST_QUERY: Json = {
  type: 'object',
  properties: {
    limit: { type: 'string' },
    offset: { type: 'string' },
    start: { type: 'string' },
    end: { type: 'string' },
    order: { type: 'array', items: { type: 'string' } },
    filter: { type: 'array', items: { type: 'string' } },
  },
};

/** A JSON-lines answer: one ListItem per line. */
export const jsonLines = (description: string): Json => ({
  description,
  content: { 'application/x-json-lines': { schema: ref('ListItem') } },
});

/** The schema of a route that only answers 405 (a method the resource lacks): no operation. */
export const NOT_AN_OPERATION: RouteSchema = { hide: true };
