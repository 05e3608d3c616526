import { isDeepStrictEqual } from 'node:util';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { type LogEntry, writeLog } from './logs.js';
import { entryOf, limitsOf, runSource, tenantOf } from './runner.js';

/** How long one POST /scripts/test may run its cases; the ones left after it are not run (failed). */
export const TEST_BUDGET_MS = 20_000;

/** One test case of Script.Tests (docs/scripts.md, "Tests"). */
export interface TestCase {
  Name?: string;
  Hook?: string;
  Input?: unknown;
  User?: Doc;
  Groups?: Doc[];
  Tenant?: Doc;
  Expect?: unknown;
  ExpectError?: string;
}

export type TestVerdict = 'passed' | 'failed' | 'compile-failed';

export interface TestReport {
  verdict: TestVerdict;
  /** The stored ScriptLogs, one per test case run (or the one compile failure). */
  logs: Doc[];
  /** Some run logged console output (then a passing run answers 200 with the lines, not 204). */
  output: boolean;
}

/** Compares a run with its test case; returns why it does not meet it, or '' when it does. */
export function judge(c: TestCase, ok: boolean, result: unknown, error: string): string {
  if (c.ExpectError !== undefined) {
    if (ok) return `expected an error${c.ExpectError ? ` containing "${c.ExpectError}"` : ''}, got a result`;
    if (!error.toLowerCase().includes(c.ExpectError.toLowerCase()))
      return `expected an error containing "${c.ExpectError}"`;
    return '';
  }
  if (!ok) return 'the run failed';
  if ('Expect' in c && !isDeepStrictEqual(result ?? null, c.Expect ?? null))
    return 'the result differs from Expect';
  return '';
}

/**
 * Runs an unsaved script's tests (POST /scripts/test): each test case in a fresh sandbox context
 * under the tenant's limits, each run logged as a ScriptLog (ScriptID empty, Test the case's
 * name). A script without tests is only compiled and evaluated once.
 */
export async function runTests(
  ctx: ServiceContext,
  script: Doc,
  cases: TestCase[],
  budgetMs = TEST_BUDGET_MS,
): Promise<TestReport> {
  const tenant = await tenantOf(ctx);
  const limits = limitsOf(tenant);
  const source = String(script.Source ?? '');
  const logs: Doc[] = [];
  let output = false;
  let failed = false;
  const store = async (e: LogEntry) => {
    const obj = await writeLog(ctx, e);
    if (obj) logs.push(obj.doc);
  };
  const runs = cases.length > 0 ? cases : [undefined];
  const budgetEnds = Date.now() + budgetMs;
  for (const [i, c] of runs.entries()) {
    const started = Date.now();
    if (started > budgetEnds) {
      // The request's bound: the cases left are reported as not run.
      failed = true;
      await store({
        ...entryOf(
          { ...script, ID: '' },
          c?.Hook ?? String(script.Hook ?? ''),
          started,
          c?.Input ?? null,
          {
            ok: false,
            result: undefined,
            raw: {
              id: 0,
              result: undefined,
              console: [],
              error: 'not run',
              compileError: false,
              limits: [],
              durationMs: 0,
            },
          },
          `failed: not run, the test run's ${budgetMs / 1000} s are spent`,
        ),
        Test: c?.Name ?? `test ${i + 1}`,
      });
      continue;
    }
    const input = c?.Input ?? null;
    const inObj = (input !== null && typeof input === 'object' ? input : {}) as Doc;
    const data = {
      user: c?.User ?? (inObj.User as Doc | undefined) ?? null,
      groups: c?.Groups ?? (inObj.Groups as Doc[] | undefined) ?? [],
      tenant: { ...tenant, ...(c?.Tenant ?? {}) },
    };
    const outcome = await runSource(source, input, data, limits, true, c !== undefined);
    const hook = c?.Hook ?? String(script.Hook ?? '');
    const entry = entryOf({ ...script, ID: '' }, hook, started, input, outcome, '');
    entry.Test = c ? (c.Name ?? `test ${i + 1}`) : '';
    if (outcome.raw.console.length > 0) output = true;
    if (outcome.raw.compileError) {
      entry.Applied = 'compile failed';
      await store(entry);
      return { verdict: 'compile-failed', logs, output };
    }
    const why = c
      ? judge(c, outcome.ok, outcome.result, outcome.raw.error)
      : outcome.ok
        ? ''
        : 'the run failed';
    entry.Passed = why === '';
    entry.Applied = why === '' ? 'passed' : `failed: ${why}`;
    if (c && 'Expect' in c) entry.Expected = JSON.stringify(c.Expect ?? null);
    if (why !== '') failed = true;
    await store(entry);
  }
  return { verdict: failed ? 'failed' : 'passed', logs, output };
}
