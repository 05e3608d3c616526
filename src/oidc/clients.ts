import type { ClientMetadata } from 'oidc-provider';
import { decryptSecret } from '../auth/factors/secrets.js';
import { App } from '../objects/app.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { SIGNING_ALG } from './keys.js';

/** Additional data bound into a client secret's encryption: the secret cannot be moved to another App. */
export const secretAad = (appId: string) => `oidc-client-secret:${appId}`;

/** App.OIDC as stored (zero values when unset). */
export interface OidcSettings {
  Enabled: boolean;
  Public: boolean;
  RedirectURIs: string[];
  PostLogoutRedirectURIs: string[];
  ClientCredentials: boolean;
  MinLevel: number;
}

export function oidcSettings(doc: Doc): OidcSettings {
  const o = (doc.OIDC ?? {}) as Partial<OidcSettings>;
  const list = (v: unknown) => (Array.isArray(v) ? v.map(String) : []);
  return {
    Enabled: o.Enabled === true,
    Public: o.Public === true,
    RedirectURIs: list(o.RedirectURIs),
    PostLogoutRedirectURIs: list(o.PostLogoutRedirectURIs),
    ClientCredentials: o.ClientCredentials === true,
    MinLevel: typeof o.MinLevel === 'number' ? o.MinLevel : 0,
  };
}

/**
 * The client an App is (client ID = App ID), or undefined when the App does not exist, has not
 * enabled OpenID Connect, could not use any grant, or is confidential without an issued secret.
 * Public clients authenticate with nothing at the token endpoint and cannot use client
 * credentials; PKCE is required of every client (provider.ts).
 */
export async function clientOf(
  ctx: Pick<ServiceContext, 'db' | 'store'>,
  id: string,
): Promise<ClientMetadata | undefined> {
  if (!/^[A-Za-z0-9]{1,64}$/.test(id)) return undefined;
  const found = await ctx.store.get(App, id);
  if (!found) return undefined;
  const s = oidcSettings(found.doc);
  if (!s.Enabled) return undefined;
  const code = s.RedirectURIs.length > 0;
  const cc = s.ClientCredentials && !s.Public;
  if (!code && !cc) return undefined;
  const meta: ClientMetadata = {
    client_id: id,
    client_name: String(found.doc.Name ?? ''),
    application_type: 'web',
    redirect_uris: s.RedirectURIs,
    post_logout_redirect_uris: s.PostLogoutRedirectURIs,
    response_types: code ? ['code'] : [],
    grant_types: [
      ...(code ? ['authorization_code', 'refresh_token'] : []),
      ...(cc ? ['client_credentials'] : []),
    ],
    id_token_signed_response_alg: SIGNING_ALG,
    token_endpoint_auth_method: s.Public ? 'none' : 'client_secret_basic',
  };
  if (!s.Public) {
    const box = (await ctx.store.getSecret(App, id)).OIDCSecretBox;
    if (typeof box !== 'string' || box === '') return undefined;
    meta.client_secret = await decryptSecret(ctx, box, secretAad(id));
  }
  return meta;
}
