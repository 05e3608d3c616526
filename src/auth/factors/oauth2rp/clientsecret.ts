import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import type { ServiceContext } from '../../../store/service.js';
import { decryptSecret, encryptSecret } from '../secrets.js';

/*
 * An App's client secret at its upstream provider (App.OAuth2ClientSecret, write-only) is kept
 * encrypted like the other secrets the service must read back (TOTP seeds, initial passwords):
 * AES-256-GCM under the database's secrets key (secrets.ts). The object layer cannot reach that
 * key, so the secret is sealed here, before the App write reaches the store, and opened only
 * where a sign-in needs it (provider.ts). What the client sends is always sealed, so a value
 * that merely looks sealed is never taken as one.
 */

const AAD = 'oauth2rp:client-secret';
/** The longest secret accepted, in characters (before sealing). */
export const MAX_CLIENT_SECRET = 1024;

const APP_ROUTES = new Set(['/apps', '/apps/:id']);

export function sealClientSecrets(app: FastifyInstance, ctx: ServiceContext) {
  // A callback hook: it runs for every request, and all but App writes pass on without a promise.
  app.addHook('preHandler', (req, _reply, done) => {
    if ((req.method !== 'POST' && req.method !== 'PUT') || !APP_ROUTES.has(req.routeOptions.url ?? ''))
      return done();
    sealBody(ctx, req.body).then(() => done(), done);
  });
}

/** Replaces OAuth2ClientSecret in an App's body by its sealed form. */
async function sealBody(ctx: ServiceContext, body: unknown) {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return;
  const given = (body as Record<string, unknown>).OAuth2ClientSecret;
  if (typeof given !== 'string' || given === '') return;
  if (given.length > MAX_CLIENT_SECRET)
    throw new ApiError(
      'InvalidField',
      `OAuth2ClientSecret may have at most ${MAX_CLIENT_SECRET} characters`,
      {
        field: 'OAuth2ClientSecret',
      },
    );
  (body as Record<string, unknown>).OAuth2ClientSecret = await encryptSecret(ctx, given, AAD);
}

/** The client secret in clear, '' when none is set. */
export async function openClientSecret(ctx: ServiceContext, sealed: string): Promise<string> {
  if (sealed === '') return '';
  try {
    return await decryptSecret(ctx, sealed, AAD);
  } catch {
    throw new ApiError(
      'ProviderUnavailable',
      'the client secret of this provider cannot be read; set it again',
    );
  }
}
