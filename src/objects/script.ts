import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType } from '../schema/type.js';

/** A script run by the service on object changes or by hand (spec: scripts); its source and its tests. */
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
