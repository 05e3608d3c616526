import { ApiError } from '../core/errors.js';
import { f } from '../schema/fields.js';
import { ALL_OPS, FULL, type ObjectType, READ } from '../schema/type.js';
import { accountIdOf } from './account.js';

export const ACCOUNT_ACTIONS = ['create', 'modify', 'disable', 'delete'] as const;
export const CHANGE_STATES = [
  'planned',
  'approved',
  'in_progress',
  'applied',
  'failed',
  'cancelled',
] as const;

/**
 * One change to one account, with its lifecycle (src/directory/states.ts, docs/directory.md). A
 * client creates it (planned) and may edit it while it is planned; everything after that moves
 * through the lifecycle endpoints, applied by a provisioning agent of the target App.
 */
export const AccountChange: ObjectType = {
  kind: 'AccountChange',
  path: 'accountchanges',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { user: { list: 'own', get: 'own' }, audit: READ, sync: FULL },
  ownerField: 'UserID',
  fields: {
    PlanID: f.string({
      maxLength: 64,
      ref: 'AccountChangePlan',
      doc: 'The plan it belongs to (empty: none)',
    }),
    UserID: f.string({ maxLength: 64, ref: 'User' }),
    AppID: f.string({ maxLength: 64, ref: 'App', doc: 'The target system' }),
    Action: f.enum(ACCOUNT_ACTIONS, { doc: 'create, modify (rename and/or re-enable), disable, delete' }),
    AccountName: f.string({
      maxLength: 256,
      doc: "Name on the target; empty: derived from the user as the App's Accounts.NameFrom says",
    }),
    Reason: f.string({ maxLength: 1024 }),
    State: f.enum(CHANGE_STATES, { readOnly: true, doc: 'See docs/directory.md' }),
    AccountID: f.string({ maxLength: 140, readOnly: true, doc: 'The account, <AppID>.<UserID>' }),
    CreatedBy: f.string({ maxLength: 64, readOnly: true }),
    ApprovedBy: f.string({ maxLength: 64, readOnly: true }),
    ApprovedTime: f.timestamp({ readOnly: true }),
    AgentID: f.string({
      maxLength: 64,
      readOnly: true,
      doc: 'RemoteAgent holding (or that last held) the lease',
    }),
    LeaseUntil: f.timestamp({
      readOnly: true,
      doc: 'The lease ends; then another agent may claim the change',
    }),
    Attempts: f.integer({ readOnly: true, default: 0, doc: 'How many times the change was claimed' }),
    Error: f.string({ maxLength: 2048, readOnly: true, doc: 'Why the agent failed' }),
    DoneTime: f.timestamp({ readOnly: true, doc: 'When it was applied, failed or cancelled' }),
  },
  // One change at a time per account: a second claim for the same account fails inside the claim's
  // transaction (the key is taken), so agents never apply two changes of one account at once.
  // Likewise one change at a time naming an account on an App (docs/directory.md, "Account rules"):
  // two agents claiming creates of one name for two users cannot both be handed one.
  lookupKeys: (doc): Record<string, string> => {
    if (doc.State !== 'in_progress') return {};
    const keys: Record<string, string> = {};
    if (typeof doc.AccountID === 'string' && doc.AccountID !== '') keys.Applying = doc.AccountID;
    if (
      (doc.Action === 'create' || doc.Action === 'modify') &&
      typeof doc.AccountName === 'string' &&
      doc.AccountName !== ''
    )
      keys.Naming = `${String(doc.AppID)}\n${doc.AccountName.toLowerCase()}`;
    return keys;
  },
  prepare(ctx) {
    // Every change names its account, whoever made it, so the Applying key above holds for all.
    const editable = ctx.isCreate || ctx.previous?.State === 'planned';
    if (
      editable &&
      typeof ctx.doc.AppID === 'string' &&
      ctx.doc.AppID !== '' &&
      typeof ctx.doc.UserID === 'string'
    )
      ctx.doc.AccountID = ctx.doc.UserID === '' ? '' : accountIdOf(ctx.doc.AppID, ctx.doc.UserID);
    if (ctx.isCreate) {
      ctx.doc.CreatedBy = ctx.actor?.userId ?? '';
      return;
    }
    // Only a planned change is still the client's to edit; later it is an operation's record.
    if (ctx.previous?.State !== 'planned' && JSON.stringify(ctx.doc) !== JSON.stringify(ctx.previous))
      throw new ApiError(
        'InvalidTransition',
        `this change is ${String(ctx.previous?.State)}: only a planned change may be edited`,
      );
  },
};
