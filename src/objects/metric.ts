import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/** A measured value kept by the service (counts of objects, sign-ins, requests). */
export const Metric: ObjectType = {
  kind: 'Metric',
  path: 'metrics',
  identity: 'generated',
  ops: READ_OPS,
  grants: { audit: READ },
  fields: {
    Name: f.string(),
    Description: f.string(),
    Value: f.number(),
    Unit: f.string(),
    Time: f.timestamp(),
  },
};
