import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/** One line a script logged; read-only, written by the script runner. */
export const ScriptLog: ObjectType = {
  kind: 'ScriptLog',
  path: 'scriptlogs',
  identity: 'generated',
  ops: READ_OPS,
  grants: { audit: READ },
  fields: {
    ScriptID: f.string(),
    Time: f.timestamp(),
    Level: f.enum(['info', 'warn', 'error']),
    Message: f.text(),
  },
};
