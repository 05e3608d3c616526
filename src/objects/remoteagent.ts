import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/** A proxy or provisioning agent that reports to the service. */
export const RemoteAgent: ObjectType = {
  kind: 'RemoteAgent',
  path: 'remoteagents',
  identity: 'generated',
  ops: READ_OPS,
  grants: { audit: READ },
  fields: {
    Name: f.string(),
    Kind: f.string({ doc: 'proxy or provisioning' }),
    Version: f.string(),
    Address: f.string({ doc: 'Where the agent last reported from, as the service saw it' }),
    AppID: f.string(),
    LastSeen: f.timestamp(),
    Health: f.enum(['ok', 'stale'], {
      doc: 'stale: no report for three heartbeat intervals (docs/directory.md)',
    }),
  },
};
