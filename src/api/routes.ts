import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../store/service.js';
import { registerConsoleRoutes } from '../web/console.js';
import { registerWebRoutes } from '../web/routes.js';
import { registerAuditRoutes } from './audit.js';
import { registerAuthRoutes } from './auth.js';
import { registerProxyBackchannel } from './backchannel.js';
import { registerDirectoryRoutes } from './directory.js';
import { registerEventRoutes } from './events.js';
import { registerGroupRoutes } from './groups.js';
import { registerHealthRoutes } from './health.js';
import { registerObjectRoutes } from './objects.js';
import { registerOidcRoutes } from './oidc.js';
import { registerOpenApiRoutes } from './openapi.js';
import { registerPolicyRoutes } from './policy.js';
import { registerPrometheusRoutes } from './prometheus.js';
import { registerScriptRoutes } from './scripts.js';
import { registerUserRoutes } from './users.js';

export type Registrar = (app: FastifyInstance, ctx: ServiceContext) => void | Promise<void>;

/**
 * Every group of endpoints, registered in this order. Adding a feature = a file + one line here.
 * Routes default to requiring credentials; a route opts out with `config: { auth: 'none' | 'optional' }`.
 */
export const registrars: Registrar[] = [
  // First: it records every route registered after it, for /openapi.json.
  registerOpenApiRoutes,
  registerHealthRoutes,
  registerUserRoutes,
  registerObjectRoutes,
  registerGroupRoutes,
  registerAuthRoutes,
  registerWebRoutes,
  registerConsoleRoutes,
  registerProxyBackchannel,
  registerEventRoutes,
  registerOidcRoutes,
  registerDirectoryRoutes,
  registerPrometheusRoutes,
  registerAuditRoutes,
  registerScriptRoutes,
  registerPolicyRoutes,
];
