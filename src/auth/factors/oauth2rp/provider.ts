import {
  allowInsecureRequests,
  Configuration as ClientConfiguration,
  ClientSecretBasic,
  ClientSecretPost,
  type Configuration,
  discovery,
  enableNonRepudiationChecks,
  None,
} from 'openid-client';
import { ApiError } from '../../../core/errors.js';
import { httpsOrLoopback } from '../../../core/url.js';
import { App } from '../../../objects/app.js';
import type { Doc } from '../../../schema/fields.js';
import { parseListQuery } from '../../../store/listquery.js';
import type { StoredObject } from '../../../store/objects.js';
import { perService, type ServiceContext, stateOf } from '../../../store/service.js';
import { openClientSecret } from './clientsecret.js';

/** How long a provider may take to answer one request (discovery, token, user info, keys). */
export const PROVIDER_TIMEOUT_S = 10;
/** Discovery documents are fetched again after this long (the provider's keys are refetched by kid). */
const DISCOVERY_TTL_MS = 3600_000;

export interface ClaimNames {
  Subject: string;
  Email: string;
  EmailVerified: string;
  Name: string;
}

/** An App set up as an upstream identity provider, with its openid-client configuration. */
export interface Provider {
  app: StoredObject;
  config: Configuration;
  /** OpenID Connect (Issuer set): an ID token is required and checked. Else plain OAuth 2.0. */
  oidc: boolean;
  scopes: string[];
  claims: ClaimNames;
  userInfoURL: string;
  level: number;
  multiFactorACR: string[];
  multiFactorAMR: string[];
  createUsers: boolean;
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');
const strs = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** The App's OAuth2 settings when they make it a provider: a client ID and either an issuer or endpoints. */
export function providerSettings(doc: Doc): Doc | undefined {
  const o = (doc.OAuth2 ?? {}) as Doc;
  if (str(o.ClientID) === '') return undefined;
  if (str(o.Issuer) !== '') return o;
  if (str(o.AuthorizeURL) !== '' && str(o.TokenURL) !== '' && str(o.UserInfoURL) !== '') return o;
  return undefined;
}

/**
 * Plain HTTP is refused for provider endpoints, except to this machine (loopback), where a
 * developer's or a test's provider runs: everything else must be https. Writes of an App check
 * the same (src/objects/app.ts); this checks again what discovery names.
 */
export const secureEnough = httpsOrLoopback;

/** The service's discovered providers, by App ID and ETag (src/store/service.ts). */
const DISCOVERED = perService('OAuth 2.0 provider discovery cache', () => {
  return new Map<string, { at: number; config: Promise<Configuration> }>();
});

async function configure(app: StoredObject, o: Doc, secret: string): Promise<Configuration> {
  const clientId = str(o.ClientID);
  const oidc = str(o.Issuer) !== '';
  const urls = oidc ? [str(o.Issuer)] : [str(o.AuthorizeURL), str(o.TokenURL), str(o.UserInfoURL)];
  const insecure = urls.some((u) => !u.startsWith('https:'));
  for (const u of urls)
    if (!secureEnough(u))
      throw new ApiError('ProviderUnavailable', `App ${app.id}: provider URLs must be https (${u})`);
  const execute = insecure ? [allowInsecureRequests] : [];
  let config: Configuration;
  if (oidc) {
    // The secret goes in a Basic header (the OpenID Connect default method); without one, a public client.
    const auth = secret ? ClientSecretBasic(secret) : None();
    config = await discovery(new URL(str(o.Issuer)), clientId, undefined, auth, {
      execute,
      timeout: PROVIDER_TIMEOUT_S,
    });
    const m = config.serverMetadata();
    for (const u of [m.authorization_endpoint, m.token_endpoint, m.jwks_uri, m.userinfo_endpoint])
      if (u !== undefined && !secureEnough(u))
        throw new ApiError('ProviderUnavailable', `App ${app.id}: the provider names an insecure endpoint`);
    // The ID token's signature is checked against the provider's published keys, not only its claims.
    enableNonRepudiationChecks(config);
  } else {
    const auth = secret ? ClientSecretPost(secret) : None();
    config = new ClientConfiguration(
      {
        issuer: new URL(str(o.AuthorizeURL)).origin,
        authorization_endpoint: str(o.AuthorizeURL),
        token_endpoint: str(o.TokenURL),
      },
      clientId,
      undefined,
      auth,
    );
    for (const run of execute) run(config);
  }
  config.timeout = PROVIDER_TIMEOUT_S;
  return config;
}

/** The provider an App describes; 404 when the App does not exist or is not set up as one. */
export async function loadProvider(ctx: ServiceContext, appId: string): Promise<Provider> {
  const app = await ctx.store.get(App, appId);
  const o = app ? providerSettings(app.doc) : undefined;
  if (!app || !o) throw new ApiError('NotFound', `App ${appId} is not set up as an identity provider`);
  const key = `${app.id}:${app.etag}`;
  const cache = stateOf(ctx, DISCOVERED);
  const now = Date.now();
  let hit = cache.get(key);
  if (!hit || now - hit.at > DISCOVERY_TTL_MS) {
    const secret = await openClientSecret(
      ctx,
      str((await ctx.store.getSecret(App, app.id)).OAuth2ClientSecret),
    );
    hit = { at: now, config: configure(app, o, secret) };
    const mine = hit;
    for (const k of cache.keys()) if (k.startsWith(`${app.id}:`)) cache.delete(k);
    cache.set(key, mine);
    // A failed discovery (provider down) is tried again on the next sign-in, not remembered.
    mine.config.catch(() => {
      if (cache.get(key) === mine) cache.delete(key);
    });
  }
  let config: Configuration;
  try {
    config = await hit.config;
  } catch (e) {
    throw providerError(e, 'discovery');
  }
  const claims = (o.Claims ?? {}) as Doc;
  const level = typeof o.Level === 'number' && o.Level >= 1 && o.Level <= 3 ? o.Level : 2;
  return {
    app,
    config,
    oidc: str(o.Issuer) !== '',
    scopes: strs(o.Scopes),
    claims: {
      Subject: str(claims.Subject) || 'sub',
      Email: str(claims.Email) || 'email',
      EmailVerified: str(claims.EmailVerified) || 'email_verified',
      Name: str(claims.Name) || 'name',
    },
    userInfoURL: str(o.UserInfoURL),
    level,
    multiFactorACR: strs(o.MultiFactorACR),
    multiFactorAMR: strs(o.MultiFactorAMR),
    createUsers: o.CreateUsers === true,
  };
}

/**
 * What went wrong talking to a provider, as an API error: it could not be reached or timed out
 * (502 Provider Unavailable), or what it answered failed a check (400 Federation Failed).
 */
export function providerError(e: unknown, step: string): ApiError {
  if (e instanceof ApiError) return e;
  const err = e as {
    name?: string;
    message?: string;
    code?: string;
    error?: string;
    error_description?: string;
    cause?: { code?: string; message?: string };
  };
  const network =
    err.name === 'AbortError' ||
    err.name === 'TimeoutError' ||
    err.message === 'fetch failed' ||
    (typeof err.cause?.code === 'string' && /^(E|UND_ERR)/.test(err.cause.code));
  // openid-client wraps the check that failed; its message names the claim (nonce, aud, ...).
  const claim = typeof err.cause?.message === 'string' ? ` (${err.cause.message})` : '';
  const said =
    claim + (err.error ? ` (${err.error}${err.error_description ? `: ${err.error_description}` : ''})` : '');
  const why = `${err.code ? `${err.code}: ` : ''}${err.message ?? String(e)}${said}`.slice(0, 400);
  return network
    ? new ApiError('ProviderUnavailable', `the identity provider could not be reached (${step})`)
    : new ApiError('FederationFailed', `the identity provider's answer was refused (${step}): ${why}`);
}

/** Every App set up as a provider, by name: the sign-in page shows a button for each. */
export async function listProviders(ctx: ServiceContext): Promise<{ ID: string; Name: string }[]> {
  const page = await ctx.store.list(App, parseListQuery(App, { order: 'Name' }));
  const out: { ID: string; Name: string }[] = [];
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) {
      if (!line) continue;
      const { ID, Item } = JSON.parse(line) as { ID: string; Item: Doc };
      if (providerSettings(Item)) out.push({ ID, Name: str(Item.Name) || ID });
    }
  return out;
}
