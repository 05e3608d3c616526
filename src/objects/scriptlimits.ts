import { f } from '../schema/fields.js';
import type { FieldRule } from '../schema/type.js';

/**
 * The Tenant's settings for scripts (docs/scripts.md): the sandbox limits of every run and how
 * long ScriptLogs are kept. Kept here, beside the Tenant, so the tenant file only spreads them in.
 * The defaults are safe for a hostile script; the maxima bound what an administrator may allow.
 */
export const SCRIPT_TENANT_FIELDS = {
  ScriptTimeLimitMs: f.integer({
    min: 1,
    max: 1000,
    default: 100,
    doc: 'Time a script run may take (measured from the start of its own code), in milliseconds',
  }),
  ScriptMemoryLimitBytes: f.integer({
    min: 1_048_576,
    max: 67_108_864,
    default: 16_777_216,
    doc: 'Memory a script run may allocate, in bytes',
  }),
  ScriptStackLimitBytes: f.integer({
    min: 65_536,
    max: 1_048_576,
    default: 262_144,
    doc: 'Stack a script run may use (bounds recursion depth), in bytes',
  }),
  ScriptOutputLimitBytes: f.integer({
    min: 1024,
    max: 1_048_576,
    default: 65_536,
    doc: 'Console output plus result of a script run, in characters',
  }),
  ScriptLogRetentionSeconds: f.integer({
    min: 60,
    max: 31_536_000,
    default: 7 * 86400,
    doc: 'How long ScriptLogs are kept before they are deleted',
  }),
};

/** Only an administrator changes them (a sync key must not loosen a sandbox). */
export const SCRIPT_TENANT_RULES: Record<string, FieldRule> = Object.fromEntries(
  Object.keys(SCRIPT_TENANT_FIELDS).map((k) => [k, 'admin' as const]),
);
