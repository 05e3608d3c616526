import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/** A proxy or other agent that reports to the service. */
export const RemoteAgent: ObjectType = {
  kind: 'RemoteAgent',
  path: 'remoteagents',
  identity: 'generated',
  ops: READ_OPS,
  grants: { audit: READ },
  fields: {
    Name: f.string(),
    Kind: f.string(),
    Version: f.string(),
    Address: f.string(),
    AppID: f.string(),
    LastSeen: f.timestamp(),
  },
};
