import { checkHostname, checkUpstream, f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType } from '../schema/type.js';

/** A host name served by an App's proxies: where requests go and how they are authenticated. */
export const VirtualHost: ObjectType = {
  kind: 'VirtualHost',
  path: 'virtualhosts',
  identity: 'named',
  ops: ALL_OPS,
  fieldRules: { AppID: 'admin', Upstream: 'admin', Auth: 'admin' },
  checkName: checkHostname,
  fields: {
    AppID: f.string({ maxLength: 64, doc: 'The App whose proxies serve this host' }),
    Upstream: f.string({
      check: checkUpstream,
      maxLength: 2048,
      doc: "Where the proxy forwards requests for this host (http or https URL); empty: the proxy's proxy.upstream",
    }),
    Auth: f.enum(['', 'required', 'optional', 'none'], {
      doc: "The proxy's authentication mode for this host; empty: the proxy's default (proxy.auth when set, else the App's ProxyAuth)",
    }),
    ACME: f.boolean({ default: true, doc: 'Obtain a certificate for this name by ACME' }),
  },
};
