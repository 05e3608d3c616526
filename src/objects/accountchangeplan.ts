import { f } from '../schema/fields.js';
import { ALL_OPS, FULL, type ObjectType, READ } from '../schema/type.js';

/**
 * A planned set of account changes (AccountChange objects with its ID in PlanID), for one user or
 * many. Its State moves only through POST /accountchangeplans/:id/approve and .../cancel
 * (src/directory/states.ts, docs/directory.md).
 */
export const AccountChangePlan: ObjectType = {
  kind: 'AccountChangePlan',
  path: 'accountchangeplans',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { audit: READ, sync: FULL },
  fields: {
    Name: f.string({ maxLength: 256 }),
    Reason: f.string({ maxLength: 1024, doc: 'Why these changes are planned' }),
    State: f.enum(['proposed', 'approved', 'cancelled'], { readOnly: true, doc: 'See docs/directory.md' }),
    CreatedBy: f.string({ maxLength: 64, readOnly: true, doc: 'User who created the plan' }),
    ApprovedBy: f.string({
      maxLength: 64,
      readOnly: true,
      doc: 'User who approved it ("system": no approval needed)',
    }),
    ApprovedTime: f.timestamp({ readOnly: true }),
  },
  prepare(ctx) {
    if (ctx.isCreate) ctx.doc.CreatedBy = ctx.actor?.userId ?? '';
  },
};
