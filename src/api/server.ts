import { Stream } from 'node:stream';
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
import type { Factor } from '../auth/factors/factor.js';
import { useFactors } from '../auth/factors/index.js';
import { tenantDoc } from '../auth/integrity.js';
import type { Principal } from '../auth/principal.js';
import { splitList } from '../config/server.js';
import { ApiError, type ErrorKind, isApiError } from '../core/errors.js';
import { Jobs } from '../core/jobs.js';
import { holdsSecret, redactUrl } from '../core/redact.js';
import { REQUEST_ID_PATTERN, requestIdSource } from '../core/requestid.js';
import { fieldSegment, mayHoldUnstorable, unstorableAt } from '../core/text.js';
import { limitUnusedBody } from '../core/unusedbody.js';
import { type ServiceContext, ServiceState } from '../store/service.js';
import { databaseDown, databaseUnavailable } from '../store/unavailable.js';
import { errorPage, sendHtml, wantsHtml } from '../web/errorpage.js';
import { WritePath } from '../writes/path.js';
import { AnswerHooks } from './answerhooks.js';
import type { AuditDraft } from './auditentry.js';
import { requestLogger } from './requestlogger.js';
import { registrars } from './routes.js';
import { requestValidators, schemaRefusal } from './validation.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | undefined;
    /** The policy rule that refused the request, if one did (the audit trail records it). */
    refusedBy?: string;
    /** An object write's audit entry, drafted for its own statement (src/api/auditentry.ts). */
    auditDraft: AuditDraft | undefined;
  }
  interface FastifyInstance {
    /** The service object this server serves (src/store/service.ts): its state, jobs, store. */
    readonly service: ServiceContext;
    /** What features do with every answer (src/api/answerhooks.ts). */
    readonly answers: AnswerHooks;
  }
  interface FastifyContextConfig {
    /** required (default): 401 without credentials; optional: principal if any; none: not even looked at. */
    auth?: 'required' | 'optional' | 'none';
    /**
     * A signed-in session below the required level is admitted with no scopes: it may follow its
     * own sign-in and nothing else (GET /events, kind Auth, for the waiting sign-in pages).
     */
    followSignIn?: boolean;
  }
}

export const API_VERSIONS = ['v1'] as const;
const BODY_LIMIT = 1024 * 1024;

/** The whole request, body included, must arrive within this time (Node answers 408). */
export const REQUEST_TIMEOUT_MS = 60_000;
/** A connection with no traffic either way for this long is closed (a stalled body, say). */
export const IDLE_TIMEOUT_MS = 120_000;

export interface ServerOptions extends ServiceContext {
  /** PEM certificate and key: serve HTTPS instead of HTTP. */
  https?: { cert: Buffer; key: Buffer };
  /** The sign-in factors this service serves, instead of the registry's (src/auth/factors/index.ts). */
  factors?: readonly Factor[];
  /** For tests: REQUEST_TIMEOUT_MS and IDLE_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  idleTimeoutMs?: number;
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

/** Pino's loggers answer whether a level is written; a logger without the method is asked to write. */
type LevelCheck = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/** One log line per request, when it completes, with the request id and no secrets. */
class RequestLog extends LogController {
  override incomingRequest() {}
  override requestCompleted(_err: Error | null | undefined, req: FastifyRequest, reply: FastifyReply) {
    // Below the configured level (warn, say) the line is dropped: do not build it.
    if ((req.log as LevelCheck).isLevelEnabled?.('info') === false) return;
    req.log.info(
      {
        method: req.method,
        url: redactUrl(req.url),
        ip: req.ip,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        // Who asked, when known (an API key without a user, or no credentials: null), refused or not.
        user: req.principal?.userId || null,
      },
      'request',
    );
  }
}

/**
 * A path the router cannot decode (invalid UTF-8 escapes, such as an encoded lone surrogate
 * %ED%A0%80) or a parameter over maxParamLength: our error shape, not Fastify's.
 */
function answerFrameworkError(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  reply.header('X-Request-Id', req.id); // the onRequest hook does not run for these
  const e =
    err.code === 'FST_ERR_BAD_URL'
      ? new ApiError('BadRequest', 'the path is not valid percent-encoded UTF-8', { field: 'path' })
      : err.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? new ApiError('BadRequest', 'a path segment is too long', { field: 'path' })
        : new ApiError('Internal', 'internal error; the request id identifies it in the logs');
  if (e.status === 500) req.log.error({ err }, 'unhandled error');
  sendError(e, req, reply);
}

export async function createServer(opts: ServerOptions): Promise<FastifyInstance> {
  const { https, requestTimeoutMs, idleTimeoutMs, factors, ...given } = opts;
  const ctx = composeService(given);
  if (factors) useFactors(ctx, factors);
  const trusted = splitList(ctx.config.server.trustproxy);
  const newRequestId = requestIdSource();
  const app = Fastify({
    ...(https ? { https } : {}),
    loggerInstance: opts.logger as FastifyBaseLogger,
    logController: new RequestLog(),
    childLoggerFactory: requestLogger,
    bodyLimit: BODY_LIMIT,
    // Every wait has a bound: Fastify's defaults (0) let a body that never finishes hold its
    // connection for good. Websocket streams clear the idle timer when they take the socket.
    requestTimeout: requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
    connectionTimeout: idleTimeoutMs ?? IDLE_TIMEOUT_MS,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      // Every log line carries the id: one shaped like a key (a client's mistake) is replaced.
      return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) && !holdsSecret(given, false)
        ? given
        : newRequestId();
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 256 },
    frameworkErrors: answerFrameworkError,
    return503OnClosing: true,
    // Only named proxies may set the client address through X-Forwarded-For.
    trustProxy: trusted.length > 0 ? trusted : false,
  });
  app.decorate('service', ctx);
  // The one place the service's background jobs start and stop (src/core/jobs.ts).
  const jobs = ctx.jobs as Jobs;
  app.addHook('onReady', async () => jobs.start());
  app.addHook('onClose', async () => jobs.stop());
  app.decorateRequest('principal', undefined);
  app.decorateRequest('auditDraft', undefined);
  // Only JSON bodies for the API; form bodies are added by the sign-in endpoints that take them.
  app.removeContentTypeParser('text/plain');
  addJsonParser(app);
  // A body the service answers without reading (credentials refused in onRequest, a GET's):
  // Node would drain it without limit after the answer to keep the connection. Read within a
  // bound instead, or close the connection after the answer (src/core/unusedbody.ts).
  app.decorate('answers', new AnswerHooks(app));
  app.answers.beforeSend((req, reply) => {
    if (!req.raw.complete) limitUnusedBody(req.raw, reply.raw);
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
    reply.header('X-Service-Api-Version', 'v1');
    // Before credentials: an access_token in the query is looked up in the store too.
    if (req.url.includes('%00') || req.url.includes('\u0000')) refuseNulInUrl(req);
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

  // Form bodies (each endpoint that takes them adds its parser): the JSON parser checked JSON.
  // A streamed body (video/webm, read by its handler) is not fields: walking it would never end.
  // A callback hook: it runs for every request and does no async work.
  app.addHook('preValidation', (req, _reply, done) => {
    const body = req.body;
    if (body === null || typeof body !== 'object' || isJson(req) || body instanceof Stream) return done();
    const at = unstorableAt(body);
    done(at === undefined ? undefined : unstorableField(at === '' ? 'body' : at));
  });

  app.setValidatorCompiler(requestValidators());

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
    } else if (err.validation) e = schemaRefusal(err);
    else if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)
      e = new ApiError('BadRequest', err.message);
    else if (databaseUnavailable(err)) {
      req.log.warn({ err }, 'the database is unavailable');
      e = databaseDown();
    } else {
      req.log.error({ err }, 'unhandled error');
      e = new ApiError('Internal', 'internal error; the request id identifies it in the logs');
    }
    if (e.rule) req.refusedBy = e.rule;
    return sendError(e, req, reply, ctx);
  });

  app.setNotFoundHandler((req: FastifyRequest) => {
    throw new ApiError('NotFound', `no endpoint ${req.method} ${redactUrl(req.url.split('?')[0] ?? '')}`);
  });

  for (const register of registrars) await register(app, ctx);
  return app;
}

/**
 * The service object: what the caller gave (store, database, logger, configuration; start-up
 * may have added jobs already) and what every service owns besides: the write path, its state
 * and its background jobs.
 */
function composeService(given: ServiceContext): ServiceContext {
  const ctx: ServiceContext = { ...given };
  ctx.writes ??= new WritePath(ctx);
  ctx.state ??= new ServiceState();
  ctx.jobs ??= new Jobs((err, name) => ctx.logger.warn({ err, job: name }, `${name} failed`));
  return ctx;
}

/**
 * Every error answer: the ApiError's status, headers and X-Error-Code, and its JSON body; a
 * browser navigating gets the same as a page (src/web/errorpage.ts). The page names the tenant
 * unless the database is why the request failed (asking it again would only wait longer).
 */
async function sendError(e: ApiError, req: FastifyRequest, reply: FastifyReply, ctx?: ServiceContext) {
  for (const [k, v] of Object.entries(e.headers)) reply.header(k, v);
  reply.header('X-Error-Code', e.code);
  if (wantsHtml(req)) {
    const tenant =
      ctx && e.status < 500
        ? await tenantDoc(ctx).then(
            (t) => String(t.Name || ''),
            () => '',
          )
        : '';
    const html = errorPage({
      tenant: tenant || 'Gatehouse',
      status: e.status,
      code: e.code,
      message: e.message,
      requestId: String(req.id),
      signedIn: req.principal?.via === 'session' && req.principal.userId !== '',
      path: redactUrl(req.url.split('?')[0] ?? ''),
    });
    return sendHtml(reply, e.status, html);
  }
  return reply
    .code(e.status)
    .type('application/json')
    .send(JSON.stringify(e.body(String(req.id))));
}

const unstorableField = (field: string) =>
  new ApiError('InvalidField', `${field} may not contain U+0000 or an unpaired UTF-16 surrogate`, { field });

const isJson = (req: FastifyRequest) => /^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '');

/**
 * Fastify's JSON parser (prototype poisoning refused, as by default), then the one check that no
 * string, key or value, holds U+0000 or an unpaired surrogate (src/core/text.ts). A body without
 * a \u escape of one costs a single scan of its text.
 */
function addJsonParser(app: FastifyInstance) {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    parse(req, text, (err, value) => {
      if (err) return done(err, undefined);
      const at = mayHoldUnstorable(text) ? unstorableAt(value) : undefined;
      if (at !== undefined) return done(unstorableField(at === '' ? 'body' : at), undefined);
      done(null, value);
    });
  });
}

/**
 * A %00 in the URL: the path parameter, query parameter (name or value) or path segment that
 * decodes to U+0000, named in Field. The query parser and the router cannot produce an unpaired
 * surrogate (they decode UTF-8), so U+0000 is the only character to look for here.
 */
function refuseNulInUrl(req: FastifyRequest): void {
  const params = (req.params ?? {}) as Record<string, unknown>;
  // '*' is the not-found route's parameter: the whole path.
  for (const [name, value] of Object.entries(params))
    if (typeof value === 'string' && value.includes('\u0000'))
      throw unstorableField(name === '*' ? 'path' : name);
  const query = (req.query ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(query)) {
    if (name.includes('\u0000')) throw unstorableField(fieldSegment(name));
    const values = Array.isArray(value) ? value : [value];
    if (values.some((v) => typeof v === 'string' && v.includes('\u0000'))) throw unstorableField(name);
  }
  if (decodeURIComponentOr(req.url.split('?')[0] ?? '').includes('\u0000')) throw unstorableField('path');
}

function decodeURIComponentOr(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
