import { ApiError } from '../core/errors.js';
import { httpsOrLoopback } from '../core/url.js';
import { checkOrigin, checkUrl, f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType, READ } from '../schema/type.js';
import { checkRedirectUri } from './oidcclient.js';

export const App: ObjectType = {
  kind: 'App',
  path: 'apps',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { audit: READ },
  // Who may use an app through the proxy, and how the proxy authenticates them.
  fieldRules: { AccessGroups: 'admin', ProxyAuth: 'admin', OIDC: 'admin' },
  unique: ['Name'],
  fields: {
    Name: f.string({ maxLength: 256 }),
    Description: f.text({ maxLength: 4096 }),
    URL: f.string({ check: checkUrl, maxLength: 2048, doc: 'Where users reach the application' }),
    AllowedOrigins: f.strings({
      check: checkOrigin,
      maxItems: 64,
      doc: 'Origins users may be sent back to after sign-in',
    }),
    AccessGroups: f.strings({
      maxItems: 64,
      doc: 'Group IDs whose members may use the app (empty: everyone)',
    }),
    ProxyAuth: f.enum(['required', 'optional', 'none'], {
      doc: 'Default authentication mode of a proxy tied to this app, unless the proxy sets proxy.auth',
    }),
    OAuth2: f.object(
      {
        ClientID: f.string({ maxLength: 512 }),
        AuthorizeURL: f.string({ check: checkUrl, maxLength: 2048 }),
        TokenURL: f.string({ check: checkUrl, maxLength: 2048 }),
        Scopes: f.strings({ maxItems: 32 }),
        Issuer: f.string({
          check: checkUrl,
          maxLength: 2048,
          doc: 'OpenID Connect issuer: endpoints by discovery, ID tokens checked (docs/federation.md)',
        }),
        UserInfoURL: f.string({
          check: checkUrl,
          maxLength: 2048,
          doc: 'Plain OAuth 2.0 (no Issuer): the user-info endpoint that names the user',
        }),
        Claims: f.object(
          {
            Subject: f.string({ maxLength: 128, doc: 'Claim holding the stable user ID (sub; GitHub: id)' }),
            Email: f.string({ maxLength: 128, doc: 'Claim holding the e-mail address (email)' }),
            EmailVerified: f.string({
              maxLength: 128,
              doc: 'Claim that is true when the provider verified the address (email_verified)',
            }),
            Name: f.string({ maxLength: 128, doc: 'Claim holding the full name (name)' }),
          },
          { doc: 'Where the user-info or ID-token claims are; empty: the OpenID Connect names' },
        ),
        Level: f.integer({
          min: 1,
          max: 3,
          default: 2,
          doc: 'Integrity level a sign-in through this provider gives',
        }),
        MultiFactorACR: f.strings({
          maxItems: 16,
          doc: 'acr values of the ID token that mean multi-factor: the sign-in gives level 3',
        }),
        MultiFactorAMR: f.strings({
          maxItems: 16,
          doc: 'amr values of the ID token that mean multi-factor (e.g. mfa): level 3',
        }),
        CreateUsers: f.boolean({ doc: 'A provider identity linked to no user creates a new user' }),
        HaveClientSecret: f.boolean({ readOnly: true, doc: 'A client secret is set (write-only)' }),
      },
      { doc: 'OAuth 2.0 relying-party settings (for /auth/oauth2rp)' },
    ),
    HaveProxyToken: f.boolean({ readOnly: true, doc: 'A proxy token (auth.token) has been issued' }),
    OIDC: f.object(
      {
        Enabled: f.boolean({
          doc: 'The app signs people in with Gatehouse as its OpenID provider (client ID: the App ID)',
        }),
        Public: f.boolean({
          doc: 'A public client (browser or native app that cannot keep a secret): no secret, PKCE only',
        }),
        RedirectURIs: f.strings({
          check: checkRedirectUri,
          maxItems: 32,
          maxLength: 2048,
          doc: 'Where authorization responses may go; compared exactly',
        }),
        PostLogoutRedirectURIs: f.strings({
          check: checkRedirectUri,
          maxItems: 32,
          maxLength: 2048,
          doc: 'Where RP-initiated logout may return to; compared exactly',
        }),
        ClientCredentials: f.boolean({
          doc: 'May use the client-credentials grant (confidential clients only)',
        }),
        MinLevel: f.integer({
          min: 0,
          max: 4,
          doc: 'Integrity level a session needs to sign in to the app (0: Tenant.IntegrityRead)',
        }),
      },
      { doc: 'OpenID Connect client settings (docs/federation.md)' },
    ),
    HaveOIDCSecret: f.boolean({
      readOnly: true,
      doc: 'A client secret (POST /apps/:id/oidc/secret) has been issued',
    }),
    Accounts: f.object(
      {
        Groups: f.strings({ maxItems: 64, doc: 'Group IDs whose active members get an account' }),
        NameFrom: f.enum(['UserName', 'EmailLocalPart'], { doc: 'How an account name is derived' }),
        InitialPassword: f.boolean({ doc: 'New accounts get a generated initial password' }),
        OnRemove: f.enum(['disable', 'delete'], { doc: 'What leaving the groups or a disabled user does' }),
      },
      { doc: 'Accounts on this target (docs/directory.md)' },
    ),
  },
  writeOnly: {
    OAuth2ClientSecret: f.string({
      // Stored sealed (src/auth/factors/oauth2rp/clientsecret.ts: at most 1024 characters before).
      maxLength: 8192,
      doc: 'Client secret at the upstream provider (at most 1024 characters); kept encrypted in hidden state, never returned ("" removes it)',
    }),
  },
  prepare(ctx) {
    // The upstream provider's client secret: hidden state only; HaveClientSecret tells it is set.
    const given = ctx.input.OAuth2ClientSecret;
    if (given !== undefined && given !== null) {
      if (typeof given !== 'string')
        throw new ApiError('InvalidField', 'OAuth2ClientSecret must be a string', {
          field: 'OAuth2ClientSecret',
        });
      if (given === '') delete ctx.secret.OAuth2ClientSecret;
      else ctx.secret.OAuth2ClientSecret = given;
    }
    const oauth2 = (ctx.doc.OAuth2 ?? {}) as Record<string, unknown>;
    checkProvider(oauth2);
    ctx.doc.OAuth2 = { ...oauth2, HaveClientSecret: typeof ctx.secret.OAuth2ClientSecret === 'string' };
  },
};

const PROVIDER_URLS = ['Issuer', 'AuthorizeURL', 'TokenURL', 'UserInfoURL'] as const;

/**
 * An App's upstream-provider settings that could never work are refused when written, not found
 * out at every sign-in (502): plain-http endpoints off this machine (the sign-in refuses them),
 * and a plain OAuth 2.0 provider (no Issuer) without all three endpoints, the user-info one
 * naming the user included. A client ID alone is allowed: the App is not a provider yet.
 */
function checkProvider(o: Record<string, unknown>) {
  const text = (name: string) => (typeof o[name] === 'string' ? (o[name] as string) : '');
  for (const name of PROVIDER_URLS) {
    const v = text(name);
    if (v !== '' && !httpsOrLoopback(v))
      throw new ApiError(
        'InvalidField',
        `OAuth2.${name} must be an https URL (plain http only to this machine: 127.0.0.1, [::1], localhost)`,
        { field: `OAuth2.${name}` },
      );
  }
  if (text('Issuer') !== '') return;
  const endpoints = ['AuthorizeURL', 'TokenURL', 'UserInfoURL'] as const;
  const given = endpoints.filter((n) => text(n) !== '');
  const missing = endpoints.filter((n) => text(n) === '');
  if (given.length > 0 && missing.length > 0)
    throw new ApiError(
      'InvalidField',
      `OAuth2.${missing[0]} is needed: a plain OAuth 2.0 provider (no Issuer) needs AuthorizeURL, TokenURL and UserInfoURL (the user-info endpoint names the user)`,
      { field: `OAuth2.${missing[0]}` },
    );
}
