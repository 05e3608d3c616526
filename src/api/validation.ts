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
