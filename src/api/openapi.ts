import type { FastifyInstance, RouteOptions } from 'fastify';
import { factors } from '../auth/factors/index.js';
import { ErrorCodes } from '../core/errors.js';
import type { Json, RouteSchema } from '../core/routeschema.js';
import { objectTypes } from '../objects/registry.js';
import type { ServiceContext } from '../store/service.js';
import { propertiesOf } from './objectschemas.js';
import { requestValidators } from './validation.js';

/**
 * The OpenAPI document of the whole API, generated from the routes as they are registered: every
 * route declares a Fastify schema (summary, tags, params, querystring, headers, body, response),
 * an onRoute hook records it here, and GET /openapi.json turns the records into path items. No
 * path of the document is written by hand.
 */

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered after the OpenAPI collector was installed (src/api/openapi.ts). */
    apiRoutes: RegisteredRoute[];
  }
}

export interface RegisteredRoute {
  method: string;
  /** Fastify's form: /users/:id. */
  url: string;
  schema: RouteSchema | undefined;
}

/** A validator that accepts everything: the route's handler validates (RouteSchema.validatedBy). */
const handlerValidates = () => () => true;

/**
 * Records every route as it is registered and serves the document built from the records. The
 * first registrar, so every route after it is seen.
 */
export function registerOpenApiRoutes(app: FastifyInstance, _ctx: ServiceContext) {
  const routes: RegisteredRoute[] = [];
  app.decorate('apiRoutes', routes);
  const validators = requestValidators(true);
  // Response schemas describe the answers; they never filter or reorder what a handler sends
  // (Fastify would otherwise serialize through them and drop undeclared properties).
  app.setSerializerCompiler(() => (data: unknown) => JSON.stringify(data));
  app.addHook('onRoute', (route: RouteOptions) => {
    const by = (route.schema as RouteSchema | undefined)?.validatedBy;
    if (by === 'handler') route.validatorCompiler = handlerValidates;
    else if (by === 'schema') route.validatorCompiler = validators;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods)
      routes.push({ method, url: route.url, schema: route.schema as RouteSchema | undefined });
  });
  let text: string | undefined;
  app.get(
    '/openapi.json',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['Service'],
        summary: 'This document: the OpenAPI 3.1 description of the API',
        response: { 200: { description: 'The document', type: 'object' } },
      },
    },
    async (_req, reply) => {
      text ??= JSON.stringify(openApiDocument(routes));
      return reply.type('application/json').send(text);
    },
  );
}

/** /users/:id → /users/{id} */
export const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function parametersOf(schema: RouteSchema): Json[] {
  const out: Json[] = [];
  const add = (where: 'path' | 'query' | 'header', part: Json | undefined) => {
    const properties = (part?.properties ?? {}) as Record<string, Json>;
    const required = new Set((part?.required ?? []) as string[]);
    for (const [name, { description, ...s }] of Object.entries(properties)) {
      out.push({
        name,
        in: where,
        ...(where === 'path' || required.has(name) ? { required: true } : {}),
        ...(description ? { description } : {}),
        schema: s,
        ...(where === 'query' && s.type === 'array' ? { explode: true } : {}),
      });
    }
  };
  add('path', schema.params);
  add('query', schema.querystring);
  add('header', schema.headers);
  return out;
}

function requestBodyOf(body: Json): Json {
  if (body.content) return { required: body.required ?? false, ...body };
  return { required: true, content: { 'application/json': { schema: body } } };
}

function responseOf(answer: Json): Json {
  const { description, headers, content, ...schema } = answer;
  if (content || Object.keys(schema).length === 0)
    return {
      description: description ?? '',
      ...(headers ? { headers } : {}),
      ...(content ? { content } : {}),
    };
  return {
    description: description ?? '',
    ...(headers ? { headers } : {}),
    content: { 'application/json': { schema } },
  };
}

function operationOf(schema: RouteSchema): Json {
  const parameters = parametersOf(schema);
  const op: Json = {};
  for (const key of ['tags', 'summary', 'description', 'operationId', 'security', 'deprecated'] as const)
    if (schema[key] !== undefined) op[key] = schema[key];
  if (parameters.length > 0) op.parameters = parameters;
  if (schema.body) op.requestBody = requestBodyOf(schema.body);
  op.responses = Object.fromEntries(
    Object.entries(schema.response ?? { default: { description: 'See the summary' } }).map(([status, r]) => [
      status,
      responseOf(r),
    ]),
  );
  return op;
}

/** Whether a registered route is an operation of the document. */
export const documented = (r: RegisteredRoute) => r.schema !== undefined && !r.schema.hide;

/** The OpenAPI 3.1 description of the API, from the routes' schemas and the object registry. */
export function openApiDocument(routes: readonly RegisteredRoute[]): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    if (!documented(route) || !route.schema) continue;
    // A GET route's HEAD twin (Fastify adds one per GET) shares its schema: only the GET is listed.
    if (route.method === 'HEAD' && routes.some((r) => r.method === 'GET' && r.url === route.url)) continue;
    const path = openApiPath(route.url);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operationOf(route.schema) };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Gatehouse API',
      version: 'v1',
      description:
        'Every endpoint of the service, generated from the routes as registered (docs/api.md tells the conventions).',
    },
    security: [{ bearer: [] }, { accessToken: [] }],
    paths,
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: {
        ...Object.fromEntries(
          objectTypes.map((t) => [
            t.kind,
            { type: 'object', properties: propertiesOf(t.fields), additionalProperties: false },
          ]),
        ),
        ...Object.assign({}, ...factors.map((f) => f.schemas ?? {})),
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

const SECURITY_SCHEMES = {
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
};
