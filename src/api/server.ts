import { randomUUID } from 'node:crypto';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { unauthenticated } from '../auth/apikeys.js';
import { authenticate } from '../auth/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { splitList } from '../config/server.js';
import { holdsSecret, redactUrl } from '../core/redact.js';
import type { ServiceContext } from './context.js';
import { ApiError, type ErrorKind, isApiError } from './errors.js';
import { registrars } from './routes.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | undefined;
  }
  interface FastifyContextConfig {
    /** required (default): 401 without credentials; optional: principal if any; none: not even looked at. */
    auth?: 'required' | 'optional' | 'none';
  }
}

export const API_VERSIONS = ['v1'] as const;
const BODY_LIMIT = 1024 * 1024;

export interface ServerOptions extends ServiceContext {
  /** PEM certificate and key: serve HTTPS instead of HTTP. */
  https?: { cert: Buffer; key: Buffer };
}

/** Fastify's own errors, mapped onto our codes so every error has the same shape. */
const FASTIFY_ERRORS: Record<string, ErrorKind> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UnsupportedMediaType',
  FST_ERR_CTP_INVALID_TYPE: 'UnsupportedMediaType',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PayloadTooLarge',
  FST_ERR_CTP_INVALID_JSON_BODY: 'InvalidJSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'InvalidJSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BadRequest',
};

/** One log line per request, when it completes, with the request id and no secrets. */
class RequestLog extends LogController {
  override incomingRequest() {}
  override requestCompleted(_err: Error | null | undefined, req: FastifyRequest, reply: FastifyReply) {
    req.log.info(
      {
        method: req.method,
        url: redactUrl(req.url),
        ip: req.ip,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request',
    );
  }
}

export async function createServer(opts: ServerOptions): Promise<FastifyInstance> {
  const { https, ...ctx } = opts;
  const trusted = splitList(ctx.config.server.trustproxy);
  const app = Fastify({
    ...(https ? { https } : {}),
    loggerInstance: opts.logger as FastifyBaseLogger,
    logController: new RequestLog(),
    bodyLimit: BODY_LIMIT,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      // Every log line carries the id: one shaped like a key (a client's mistake) is replaced.
      return typeof given === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(given) && !holdsSecret(given, false)
        ? given
        : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 256 },
    return503OnClosing: true,
    // Only named proxies may set the client address through X-Forwarded-For.
    trustProxy: trusted.length > 0 ? trusted : false,
  });
  app.decorateRequest('principal', undefined);
  // Only JSON bodies for the API; form bodies are added by the sign-in endpoints that take them.
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
    reply.header('X-Service-Api-Version', 'v1');
    const version = req.headers['x-service-api-version'];
    if (version !== undefined && version !== 'v1') {
      throw new ApiError(
        'UnsupportedVersion',
        `X-Service-Api-Version ${JSON.stringify(version)} is not supported; supported: ${API_VERSIONS.join(', ')}`,
        {
          field: 'X-Service-Api-Version',
        },
      );
    }
    const mode = req.routeOptions.config?.auth ?? 'required';
    if (mode === 'none') return;
    req.principal = await authenticate(req, ctx);
    // An unknown path has no route: let the 404 handler answer rather than ask for credentials.
    if (!req.principal && mode === 'required' && req.routeOptions.url !== undefined) {
      throw unauthenticated(
        'authentication required: send an API key as "Authorization: Bearer <key>"',
        false,
      );
    }
  });

  app.setErrorHandler((err: FastifyError | ApiError, req, reply) => {
    let e: ApiError;
    if (isApiError(err)) e = err;
    else if (err.code && FASTIFY_ERRORS[err.code]) {
      const kind = FASTIFY_ERRORS[err.code] as ErrorKind;
      e = new ApiError(
        kind,
        kind === 'UnsupportedMediaType'
          ? 'request bodies must be Content-Type: application/json'
          : err.message,
      );
    } else if (err.validation || (err.statusCode && err.statusCode >= 400 && err.statusCode < 500))
      e = new ApiError('BadRequest', err.message);
    else {
      req.log.error({ err }, 'unhandled error');
      e = new ApiError('Internal', 'internal error; the request id identifies it in the logs');
    }
    for (const [k, v] of Object.entries(e.headers)) reply.header(k, v);
    reply.header('X-Error-Code', e.code);
    return reply
      .code(e.status)
      .type('application/json')
      .send(JSON.stringify(e.body(String(req.id))));
  });

  app.setNotFoundHandler((req: FastifyRequest) => {
    throw new ApiError('NotFound', `no endpoint ${req.method} ${redactUrl(req.url.split('?')[0] ?? '')}`);
  });

  for (const register of registrars) await register(app, ctx);
  return app;
}
