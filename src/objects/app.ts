import { checkOrigin, checkUrl, f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType, READ } from '../schema/type.js';

export const App: ObjectType = {
  kind: 'App',
  path: 'apps',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { audit: READ },
  // Who may use an app through the proxy, and how the proxy authenticates them.
  fieldRules: { AccessGroups: 'admin', ProxyAuth: 'admin' },
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
      },
      { doc: 'OAuth 2.0 relying-party settings (for /auth/oauth2rp)' },
    ),
    HaveProxyToken: f.boolean({ readOnly: true, doc: 'A proxy token (auth.token) has been issued' }),
  },
};
