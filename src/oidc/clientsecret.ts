import { randomBytes } from 'node:crypto';
import { encryptSecret } from '../auth/factors/secrets.js';
import { ApiError } from '../core/errors.js';
import { App } from '../objects/app.js';
import type { Actor } from '../policy/actor.js';
import { enforce } from '../policy/decide.js';
import type { ServiceContext } from '../store/service.js';
import { secretAad } from './clients.js';

/**
 * Issues (or replaces) an App's OpenID client secret; returns it (shown once). Kept encrypted, not
 * hashed: the provider compares it in constant time and needs the secret itself.
 */
export async function issueClientSecret(ctx: ServiceContext, actor: Actor, appId: string): Promise<string> {
  await enforce(ctx, actor, 'App.oidcsecret', { kind: App.kind, id: appId });
  const secret = randomBytes(32).toString('base64url');
  const box = await encryptSecret(ctx, secret, secretAad(appId));
  const saved = await ctx.store.systemPut(App, appId, (doc, hidden) =>
    doc ? { doc: { ...doc, HaveOIDCSecret: true }, secret: { ...hidden, OIDCSecretBox: box } } : null,
  );
  if (!saved) throw new ApiError('NotFound', `App ${appId} does not exist`);
  return secret;
}
