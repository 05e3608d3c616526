import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/** Bounds of the JSON texts: above the largest output limit (1 MiB) and test source (256 KiB). */
const MAX_TEXT = 1_200_000;

export const SCRIPT_LIMITS = ['time', 'memory', 'stack', 'output', 'queue'] as const;

/**
 * One run of a script: on a hook or as a test case of POST /scripts/test. Read-only, written by
 * the script runner (src/scripts/logs.ts), deleted after the Tenant's ScriptLogRetentionSeconds.
 */
export const ScriptLog: ObjectType = {
  kind: 'ScriptLog',
  path: 'scriptlogs',
  identity: 'generated',
  ops: READ_OPS,
  grants: { audit: READ },
  fields: {
    ScriptID: f.string({ doc: 'The script run (empty: an unsaved script of POST /scripts/test)' }),
    ScriptName: f.string({ maxLength: 256 }),
    Hook: f.string({ maxLength: 64, doc: 'The hook that ran it' }),
    Test: f.string({ maxLength: 256, doc: 'The test case (POST /scripts/test); empty on a hook' }),
    Time: f.timestamp({ doc: 'When the run started' }),
    Input: f.text({ maxLength: MAX_TEXT, doc: 'JSON of the input, secrets removed' }),
    Console: f.strings({ maxItems: 100_000, maxLength: MAX_TEXT, doc: 'Lines logged, each "level: text"' }),
    Result: f.text({
      maxLength: MAX_TEXT,
      doc: 'JSON of what hook(input) returned; empty when nothing or on error',
    }),
    Error: f.text({ maxLength: 4096, doc: 'Why the run failed; empty when it did not' }),
    DurationMs: f.number({ doc: 'Time the sandbox took, in milliseconds' }),
    LimitsHit: f.strings({ enum: SCRIPT_LIMITS, maxItems: 8, doc: 'time, memory, stack, output or queue' }),
    Applied: f.string({
      maxLength: 256,
      doc: 'What the service did with the result: the outcome, or the fail-safe taken',
    }),
    Passed: f.boolean({ doc: 'Tests only: the run met the test case' }),
    Expected: f.text({ maxLength: MAX_TEXT, doc: 'Tests only: JSON of the expected result' }),
  },
};
