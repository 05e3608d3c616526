import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType } from '../schema/type.js';

/** The hooks a script can serve (docs/scripts.md); '' runs on no hook (POST /scripts/test only). */
export const HOOKS = [
  'user-write',
  'sign-in',
  'group-membership',
  'account-suggestions',
  'merge-suggestions',
] as const;
export type HookName = (typeof HOOKS)[number];

/**
 * Bumped on every create or update of a Script (its prepare hook), so the script runner's cache
 * of enabled scripts notices a new script without a query (deletes come with the store's
 * 'commit' event).
 */
// module-state: a process-wide change counter: caches (src/scripts/runner.ts) only compare it, so another service's write costs one reload, never a stale read.
export const scriptWrites = { count: 0 };

/** Checks the Tests field: a JSON array of test cases (docs/scripts.md, "Tests"). */
export function checkTests(v: string): string | undefined {
  if (v.trim() === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    return 'must be a JSON array of test cases';
  }
  if (!Array.isArray(parsed)) return 'must be a JSON array of test cases';
  if (parsed.length > 100) return 'may hold at most 100 test cases';
  for (const [i, t] of parsed.entries()) {
    if (t === null || typeof t !== 'object' || Array.isArray(t)) return `test ${i} must be an object`;
    const c = t as Record<string, unknown>;
    for (const k of Object.keys(c))
      if (!['Name', 'Hook', 'Input', 'User', 'Groups', 'Tenant', 'Expect', 'ExpectError'].includes(k))
        return `test ${i}: unknown field ${k}`;
    if (c.Name !== undefined && typeof c.Name !== 'string') return `test ${i}: Name must be a string`;
    if (c.Hook !== undefined && !(HOOKS as readonly unknown[]).includes(c.Hook))
      return `test ${i}: Hook must be one of ${HOOKS.join(', ')}`;
    if (c.ExpectError !== undefined && typeof c.ExpectError !== 'string')
      return `test ${i}: ExpectError must be a string`;
    if (c.Groups !== undefined && !Array.isArray(c.Groups)) return `test ${i}: Groups must be an array`;
  }
  return undefined;
}

/** A tenant's JavaScript, run in a sandbox on one hook (docs/scripts.md), with its tests. */
export const Script: ObjectType = {
  kind: 'Script',
  // Other instances cache enabled scripts (src/scripts/runner.ts).
  cachedElsewhere: 'all',
  path: 'scripts',
  identity: 'generated',
  ops: ALL_OPS,
  fields: {
    Name: f.string({ maxLength: 256 }),
    Description: f.text({ maxLength: 4096 }),
    Hook: f.enum(['', ...HOOKS], { doc: 'Where the script runs (docs/scripts.md); empty: nowhere' }),
    Order: f.integer({ min: -1000, max: 1000, doc: 'Scripts of one hook run in ascending Order, then ID' }),
    Enabled: f.boolean({ doc: 'Only enabled scripts run on their hook' }),
    Source: f.text({ maxLength: 262_144, doc: 'JavaScript defining function hook(input)' }),
    Tests: f.text({
      maxLength: 262_144,
      check: checkTests as (v: never) => string | undefined,
      doc: 'JSON array of test cases run by POST /scripts/test',
    }),
  },
  prepare() {
    scriptWrites.count++;
  },
};
