import { checkHostname, checkUpstream, f } from './fields.js';
import { ALL_OPS, type ObjectType, READ_OPS } from './type.js';

/** A measured value kept by the service (counts of objects, sign-ins, requests). */
export const Metric: ObjectType = {
  kind: 'Metric',
  path: 'metrics',
  identity: 'generated',
  ops: READ_OPS,
  fields: {
    Name: f.string(),
    Description: f.string(),
    Value: f.number(),
    Unit: f.string(),
    Time: f.timestamp(),
  },
};

/** A proxy or other agent that reports to the service. */
export const RemoteAgent: ObjectType = {
  kind: 'RemoteAgent',
  path: 'remoteagents',
  identity: 'generated',
  ops: READ_OPS,
  fields: {
    Name: f.string(),
    Kind: f.string(),
    Version: f.string(),
    Address: f.string(),
    AppID: f.string(),
    LastSeen: f.timestamp(),
  },
};

export const Script: ObjectType = {
  kind: 'Script',
  path: 'scripts',
  identity: 'generated',
  ops: ALL_OPS,
  fields: {
    Name: f.string({ maxLength: 256 }),
    Description: f.text({ maxLength: 4096 }),
    Trigger: f.string({ maxLength: 64, doc: 'Object kind whose changes run the script (empty: manual)' }),
    Enabled: f.boolean(),
    Source: f.text({ maxLength: 262_144, doc: 'JavaScript source' }),
    Tests: f.text({ maxLength: 262_144, doc: 'JavaScript test source run by POST /scripts/test' }),
  },
};

export const ScriptLog: ObjectType = {
  kind: 'ScriptLog',
  path: 'scriptlogs',
  identity: 'generated',
  ops: READ_OPS,
  fields: {
    ScriptID: f.string(),
    Time: f.timestamp(),
    Level: f.enum(['info', 'warn', 'error']),
    Message: f.text(),
  },
};

export const VirtualHost: ObjectType = {
  kind: 'VirtualHost',
  path: 'virtualhosts',
  identity: 'named',
  ops: ALL_OPS,
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

export const VouchRequest: ObjectType = {
  kind: 'VouchRequest',
  path: 'vouchrequests',
  identity: 'generated',
  ops: ALL_OPS,
  ownerField: 'UserID',
  fields: {
    UserID: f.string({ maxLength: 64, ref: 'User', doc: 'Who asks to be vouched for' }),
    VoucherID: f.string({ maxLength: 64, ref: 'User', doc: 'Who is asked to vouch' }),
    State: f.enum(['pending', 'approved', 'rejected', 'cancelled', 'expired']),
    Reason: f.string({ maxLength: 1024 }),
    ExpireTime: f.timestamp(),
    HaveVideo: f.boolean({ readOnly: true }),
  },
};
