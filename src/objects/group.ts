import { checkRegion } from '../core/regions.js';
import { f } from '../schema/fields.js';
import { ALL_OPS, FULL, type ObjectType, READ } from '../schema/type.js';

export const Group: ObjectType = {
  kind: 'Group',
  path: 'groups',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { user: READ, audit: READ, sync: FULL },
  unique: ['Name'],
  fields: {
    Name: f.string({ maxLength: 256, doc: 'Unique group name' }),
    Description: f.text({ maxLength: 4096 }),
    RequiresApproval: f.boolean({ doc: 'Joining needs an approver' }),
    Approvers: f.strings({ maxItems: 64, ref: 'User', doc: 'User IDs who may approve requests' }),
    ApproverGroup: f.string({
      maxLength: 64,
      ref: 'Group',
      doc: 'Members of this group may approve requests',
    }),
    RequiresActivation: f.boolean({ doc: 'Members must activate the membership themselves' }),
    IntegrityLevel: f.integer({
      min: 0,
      max: 4,
      doc: 'Session integrity level needed to use the membership',
    }),
    LocationRegions: f.strings({
      check: checkRegion,
      maxItems: 64,
      doc: 'The membership counts only from a session located inside one of these regions ("[name:] latitude,longitude,radius km")',
    }),
    ExpireUnusedDays: f.integer({
      min: 0,
      max: 36500,
      doc: 'Memberships unused this many days expire (0: never)',
    }),
  },
};
