import { Ajv } from 'ajv';
import formatsModule from 'ajv-formats';
import type { FastifyError } from 'fastify';
import { ApiError } from '../core/errors.js';

interface SchemaProblem {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/**
 * A field's name as the handlers' own checks write it (src/schema/fields.ts normalize): nested
 * fields joined with dots, list items as [i]: Name.FullName, OtherEmails[1].
 */
function fieldName(segments: string[]): string {
  let out = '';
  for (const s of segments) out += /^\d+$/.test(s) ? `[${s}]` : out ? `.${s}` : s;
  return out;
}

/**
 * A request that failed its route's schema (Fastify validates params, query and body against it)
 * as the one error shape, the same answer a handler's own check gives, so whether a schema or a
 * handler noticed never shows to the client: 400 Invalid Field naming the field (missing or
 * wrong), Unknown Field for a field the schema does not have, Invalid JSON for a body that is not
 * an object.
 */
export function schemaRefusal(err: FastifyError): ApiError {
  const problem = (err.validation?.[0] ?? {}) as SchemaProblem;
  const path = (problem.instancePath ?? '')
    .split('/')
    .filter(Boolean)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = problem.params?.missingProperty;
  const extra = problem.params?.additionalProperty;
  if (path.length === 0 && typeof missing !== 'string' && typeof extra !== 'string') {
    if (err.validationContext === 'body' && problem.keyword === 'type')
      return new ApiError('InvalidJSON', 'the body must be a JSON object');
    const part =
      err.validationContext === 'querystring' ? 'the query' : `the ${err.validationContext ?? 'request'}`;
    return new ApiError('BadRequest', `${part} ${problem.message ?? 'is not valid'}`);
  }
  if (typeof missing === 'string') {
    const name = fieldName([...path, missing]);
    return new ApiError('InvalidField', `${name} is required`, { field: name });
  }
  if (typeof extra === 'string') {
    const name = fieldName([...path, extra]);
    return new ApiError('UnknownField', `${name} is not a field of this request`, { field: name });
  }
  const name = fieldName(path);
  return new ApiError('InvalidField', `${name} ${problem.message ?? 'is not valid'}`, { field: name });
}

/**
 * One schema compiler per part of the request. Bodies are checked as sent: a JSON number is not
 * a string (Fastify's default would coerce it, so `{"Password": 123456789012}` would pass as a
 * password). Query strings and path parameters are text by nature: one value where a list is
 * declared becomes a list of one, as Fastify's default does.
 *
 * `closed` (the routes with RouteSchema.validatedBy 'schema', src/api/openapi.ts): nothing is
 * added or taken away either: no defaults filled in (the write path and handlers fill them) and
 * a field a closed object (additionalProperties: false) does not have is refused, Unknown Field,
 * as the handlers' own checks refuse it, rather than silently dropped.
 */
export function requestValidators(closed = false) {
  const base = {
    useDefaults: !closed,
    removeAdditional: !closed,
    allErrors: false,
    strict: false,
    allowUnionTypes: true,
  } as const;
  const body = addFormats(new Ajv({ ...base, coerceTypes: false }));
  const text = addFormats(new Ajv({ ...base, coerceTypes: 'array' }));
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) =>
    (httpPart === 'body' ? body : text).compile(schema);
}

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = formatsModule as unknown as (ajv: Ajv) => Ajv;
