import { checkRegion } from '../core/regions.js';
import { checkOrigin, checkUrl, f } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { SCRIPT_TENANT_FIELDS, SCRIPT_TENANT_RULES } from './scriptlimits.js';

export const TENANT_ID = 'tenant';

export const Tenant: ObjectType = {
  kind: 'Tenant',
  // Other instances cache script settings (src/scripts/runner.ts).
  cachedElsewhere: 'all',
  path: 'tenant',
  identity: 'singleton',
  ops: ['get', 'update'],
  grants: { audit: { get: 'all' } },
  fieldRules: {
    RequireActivationCode: 'admin',
    IntegrityRead: 'admin',
    IntegrityWrite: 'admin',
    IntegrityCredentials: 'admin',
    IntegrityAdmin: 'admin',
    ...SCRIPT_TENANT_RULES,
    LocationLevel: 'admin',
    LocationRegions: 'admin',
    FederationLinkByEmail: 'admin',
  },
  fields: {
    Name: f.string({ maxLength: 256, default: 'Gatehouse' }),
    SigninURL: f.string({ check: checkUrl, maxLength: 2048, doc: 'Public URL of the sign-in pages' }),
    AllowedReturnOrigins: f.strings({
      check: checkOrigin,
      maxItems: 256,
      doc: 'Origins sign-in may send users back to',
    }),
    SessionIdleSeconds: f.integer({ min: 60, max: 31_536_000, default: 8 * 3600 }),
    SessionMaxSeconds: f.integer({ min: 60, max: 31_536_000, default: 7 * 86400 }),
    PasswordMinLength: f.integer({ min: 8, max: 1024, default: 12 }),
    RequireActivationCode: f.boolean({ doc: 'New users must present an activation code' }),
    // Integrity levels (docs/signin.md): 0 none, 1 identified, 2 one factor, 3 two factors, 4 hardware.
    IntegrityRead: f.integer({ min: 1, max: 4, default: 2, doc: 'Level a session needs to read' }),
    IntegrityWrite: f.integer({
      min: 1,
      max: 4,
      default: 2,
      doc: 'Level a session needs to change own data',
    }),
    IntegrityCredentials: f.integer({
      min: 1,
      max: 4,
      default: 2,
      doc: 'Level a session needs to change its own credentials',
    }),
    IntegrityAdmin: f.integer({ min: 1, max: 4, default: 3, doc: 'Level an administrator session needs' }),
    AccountChangesNeedApproval: f.boolean({
      doc: 'Account changes wait for an administrator to approve them (docs/directory.md)',
    }),
    ...SCRIPT_TENANT_FIELDS,
    // Location policy (docs/signin.md): levels from LocationLevel up need a reported location inside a region.
    LocationLevel: f.integer({
      min: 0,
      max: 4,
      check: (v: number) => (v === 1 ? 'must be 0 (off) or 2 to 4' : undefined),
      doc: 'Sessions hold this level and above only with a location inside LocationRegions (0: off)',
    }),
    LocationRegions: f.strings({
      check: checkRegion,
      maxItems: 64,
      doc: 'Regions for LocationLevel: "[name:] latitude,longitude,radius km"',
    }),
    FederationLinkByEmail: f.boolean({
      doc: 'A provider sign-in with a verified e-mail address may link to the user who has that address',
    }),
  },
};
