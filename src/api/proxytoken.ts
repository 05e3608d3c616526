import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { tokenHash } from '../backchannel/tokens.js';
import { ApiError } from '../core/errors.js';
import { App } from '../objects/app.js';
import type { StoredObject } from '../store/objects.js';
import type { ServiceContext } from '../store/service.js';
import { PROXY_TOKEN_PATTERN } from '../wire/proxy.js';

/** Checks `Authorization: Bearer <auth.token>` and returns the App the proxy is tied to. */
export async function proxyApp(req: FastifyRequest, ctx: ServiceContext): Promise<StoredObject> {
  const refuse = (why: string) =>
    new ApiError('Unauthenticated', why, {
      headers: { 'WWW-Authenticate': 'Bearer realm="gatehouse-proxy"' },
    });
  const m = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''));
  const token = m?.[1] ?? '';
  const t = PROXY_TOKEN_PATTERN.exec(token);
  if (!t) throw refuse('send the proxy token (auth.token) as "Authorization: Bearer <token>"');
  const appId = t[1] as string;
  const app = await ctx.store.get(App, appId);
  const stored = Buffer.from(
    String(app ? ((await ctx.store.getSecret(App, appId)).ProxyTokenHash ?? '') : ''),
  );
  const given = Buffer.from(tokenHash(token));
  if (!app || stored.length !== given.length || !timingSafeEqual(stored, given))
    throw refuse('the proxy token is not valid (revoked, replaced, or its App was deleted)');
  return app;
}

/**
 * For a route that authenticates with the proxy token and lets its schema validate the body:
 * the token is checked first (preValidation), so a request without a valid one is 401 whatever
 * its body, as when the handler checked both; the handler takes the App from `appOf`.
 */
export function proxyTokenFirst(ctx: ServiceContext) {
  const apps = new WeakMap<FastifyRequest, StoredObject>();
  return {
    preValidation: async (req: FastifyRequest) => {
      apps.set(req, await proxyApp(req, ctx));
    },
    appOf: (req: FastifyRequest): StoredObject => {
      const app = apps.get(req);
      if (!app) throw new Error('proxyTokenFirst: the route lacks its preValidation hook');
      return app;
    },
  };
}
