import { Ajv, type ValidateFunction } from 'ajv';
import formatsModule from 'ajv-formats';
import type { FastifyError, FastifyRequest } from 'fastify';
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
 * The refusal of a route that validates with its refusal held back (Fastify's attachValidation),
 * for its handler to throw where the spec puts the check: the object writes answer 403, 404 and
 * 428 first (src/api/objects.ts), POST /scripts/test 403.
 */
export const heldBackRefusal = (req: FastifyRequest): ApiError | undefined =>
  req.validationError ? schemaRefusal(req.validationError as FastifyError) : undefined;

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
  return ({ schema: declared, httpPart }: { schema: object; httpPart?: string }): ValidateFunction => {
    const asSent = httpPart === 'body';
    const schema = httpPart === 'headers' ? lowerCaseHeaders(declared) : declared;
    const key = `${closed ? 'closed' : 'open'} ${asSent ? 'body' : 'text'} ${JSON.stringify(schema)}`;
    let validate = compiled.get(key);
    if (!validate) {
      validate = compilerFor(closed, asSent).compile(schema);
      compiled.set(key, validate);
    }
    return validate;
  };
}

/**
 * Node gives header names in lower case. Fastify lower-cases a headers schema itself only when
 * the route keeps its default compiler; these routes bring their own, so declared names
 * (If-Match) are lower-cased here (the route schemas' headers are flat objects).
 */
function lowerCaseHeaders(schema: object): object {
  const { properties, required, ...rest } = schema as { properties?: object; required?: string[] };
  return {
    ...rest,
    ...(properties
      ? { properties: Object.fromEntries(Object.entries(properties).map(([k, v]) => [k.toLowerCase(), v])) }
      : {}),
    ...(required ? { required: required.map((k) => k.toLowerCase()) } : {}),
  };
}

/**
 * Compiled validators, shared by every service in the process (as Fastify's own compiler pool
 * shares them): a validator is a pure function of its schema and mode, and compiling every
 * route's schema again is most of what starting another server costs.
 */
// module-state: a compile cache of pure functions keyed by (mode, part, schema text); bounded by the routes' schemas.
const compiled = new Map<string, ValidateFunction>();
// module-state: the four compilers behind that cache, made on first use.
const compilers = new Map<string, Ajv>();

function compilerFor(closed: boolean, asSent: boolean): Ajv {
  const name = `${closed} ${asSent}`;
  let ajv = compilers.get(name);
  if (!ajv) {
    ajv = addFormats(
      new Ajv({
        useDefaults: !closed,
        removeAdditional: !closed,
        allErrors: false,
        strict: false,
        allowUnionTypes: true,
        coerceTypes: asSent ? false : 'array',
        // Equal schemas of two services compile once (the cache above); Ajv need not keep them.
        addUsedSchema: false,
      }),
    );
    compilers.set(name, ajv);
  }
  return ajv;
}

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = formatsModule as unknown as (ajv: Ajv) => Ajv;
