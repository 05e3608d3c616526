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
 * A request that failed its route's schema (Fastify validates params, query and body against it)
 * as the one error shape: 400 Invalid Field naming the field, the same answer a handler's own
 * check gives, so whether a schema or a handler noticed never shows to the client.
 */
export function schemaRefusal(err: FastifyError): ApiError {
  const problem = (err.validation?.[0] ?? {}) as SchemaProblem;
  const path = (problem.instancePath ?? '').split('/').filter(Boolean);
  const missing = problem.params?.missingProperty;
  const extra = problem.params?.additionalProperty;
  const name = typeof missing === 'string' ? missing : typeof extra === 'string' ? extra : path[0];
  if (name === undefined) {
    const part =
      err.validationContext === 'querystring' ? 'the query' : `the ${err.validationContext ?? 'request'}`;
    return new ApiError('BadRequest', `${part} ${problem.message ?? 'is not valid'}`);
  }
  if (typeof missing === 'string')
    return new ApiError('InvalidField', `${name} is required`, { field: name });
  if (typeof extra === 'string')
    return new ApiError('InvalidField', `${name} is not a field here`, { field: name });
  const where = path.slice(1).length ? `${name}/${path.slice(1).join('/')}` : name;
  return new ApiError('InvalidField', `${where} ${problem.message ?? 'is not valid'}`, { field: name });
}

/**
 * One schema compiler per part of the request. Bodies are checked as sent: a JSON number is not
 * a string (Fastify's default would coerce it, so `{"Password": 123456789012}` would pass as a
 * password). Query strings and path parameters are text by nature: one value where a list is
 * declared becomes a list of one, as Fastify's default does.
 */
export function requestValidators() {
  const base = { useDefaults: true, removeAdditional: true, allErrors: false, strict: false } as const;
  const body = addFormats(new Ajv({ ...base, coerceTypes: false }));
  const text = addFormats(new Ajv({ ...base, coerceTypes: 'array' }));
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) =>
    (httpPart === 'body' ? body : text).compile(schema);
}

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = formatsModule as unknown as (ajv: Ajv) => Ajv;
