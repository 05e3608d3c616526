/**
 * The fuzz loop shared by the targets: replay the committed corpus, then fast-check runs from a
 * fixed seed, then runs from a random seed for a time budget. Counterexamples are shrunk and
 * written to the corpus, and so is the first input of every rare kind a run meets (refused by one
 * side only, informational responses, trailers), up to a cap per target.
 *
 * Under `npm test` the budget is a few seconds per target. `npm run fuzz` (scripts/fuzz.mjs) sets
 * GATEHOUSE_FUZZ_SECONDS, GATEHOUSE_FUZZ_TARGET and GATEHOUSE_FUZZ_SEED and runs the same files
 * for as long as asked; GATEHOUSE_FUZZ_REPORT names a directory for the per-target summaries.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';

/** What one execution found: a property violation, or a rare kind of input worth keeping. */
export interface Verdict {
  finding?: string;
  interesting?: string;
  /** For the summary: what kind of input this was when it was neither. */
  kind?: string;
}

export interface FuzzSettings {
  /** Whether this is `npm run fuzz` (long, random) rather than the short run inside `npm test`. */
  long: boolean;
  seconds: number;
  seed: number | undefined;
  /** Targets to run: 'request', 'response' or 'all'. */
  target: string;
}

export function fuzzSettings(): FuzzSettings {
  const env = process.env;
  const seconds = Number(env.GATEHOUSE_FUZZ_SECONDS ?? '0');
  return {
    long: seconds > 0,
    seconds,
    seed: env.GATEHOUSE_FUZZ_SEED ? Number(env.GATEHOUSE_FUZZ_SEED) : undefined,
    target: env.GATEHOUSE_FUZZ_TARGET ?? 'all',
  };
}

export const wants = (s: FuzzSettings, target: string) => s.target === 'all' || s.target === target;

const CORPUS = join(dirname(fileURLToPath(import.meta.url)), 'corpus');
/** The corpus stays small: at most this many files per target. */
const CORPUS_CAP = 60;

export interface CorpusEntry<T> {
  file: string;
  note: string;
  /** A finding that is known and reported but not fixed here: the replay expects it. */
  known?: string;
  input: T;
}

export function readCorpus<T>(target: string): CorpusEntry<T>[] {
  const dir = join(CORPUS, target);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  return names.sort().map((file) => {
    const { note, known, ...input } = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    return { file, note, known, input: input as T };
  });
}

/** Writes `input` to the corpus unless the same bytes are there; false when the cap is reached. */
function saveCorpus(target: string, note: string, input: object): boolean {
  const dir = join(CORPUS, target);
  mkdirSync(dir, { recursive: true });
  const body = JSON.stringify(input);
  const name = `${createHash('sha256').update(body).digest('hex').slice(0, 12)}.json`;
  const existing = readdirSync(dir);
  if (existing.includes(name)) return true;
  if (existing.length >= CORPUS_CAP && !note.startsWith('FINDING')) return false;
  writeFileSync(join(dir, name), `${JSON.stringify({ note, ...input }, null, 2)}\n`);
  return true;
}

/** The kinds of interesting input the corpus already holds (from each file's note). */
function corpusKinds(target: string): Set<string> {
  return new Set(readCorpus(target).map((e) => e.note));
}

export interface FuzzResult<T> {
  target: string;
  executions: number;
  seed: number;
  /** The shrunk counterexample and what it violates. */
  failure?: { input: T; finding: string };
  saved: number;
  /** How many executions were of each kind (the most frequent first). */
  kinds: [string, number][];
}

/**
 * Runs `check` on inputs from `arb`: `fixedRuns` from seed 42, then random ones for `seconds`.
 * Interesting inputs of a kind the corpus lacks are saved as they are met; a failure is shrunk
 * (to the end, even past the time budget) and saved.
 */
export async function fuzz<T extends object>(opts: {
  target: string;
  /** How the summary names this run (default: the target). */
  label?: string;
  arb: fc.Arbitrary<T>;
  check: (input: T) => Verdict | Promise<Verdict>;
  fixedRuns: number;
  seconds: number;
  seed?: number;
  /** Whether to add interesting inputs to the corpus (always for counterexamples). */
  collect: boolean;
}): Promise<FuzzResult<T>> {
  let executions = 0;
  let saved = 0;
  const kinds = corpusKinds(opts.target);
  let lastFinding = '';
  const kindCounts = new Map<string, number>();
  const predicate = async (input: T) => {
    executions++;
    let v: Verdict;
    try {
      v = await opts.check(input);
    } catch (e) {
      v = { finding: `the check failed: ${(e as Error).stack ?? String(e)}` };
    }
    const kind = v.finding ? 'finding' : (v.interesting ?? v.kind ?? 'other');
    kindCounts.set(kind, (kindCounts.get(kind) ?? 0) + 1);
    if (v.interesting && opts.collect && !kinds.has(v.interesting)) {
      kinds.add(v.interesting);
      if (saveCorpus(opts.target, v.interesting, input)) saved++;
    }
    if (v.finding) {
      lastFinding = v.finding;
      return false;
    }
    return true;
  };
  const property = fc.asyncProperty(opts.arb, predicate);
  const runs: fc.Parameters<[T]>[] = [{ seed: 42, numRuns: opts.fixedRuns }];
  const seed = opts.seed ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  if (opts.seconds > 0)
    runs.push({
      seed,
      numRuns: 1_000_000_000,
      interruptAfterTimeLimit: opts.seconds * 1000,
      markInterruptAsFailure: false,
    });
  for (const params of runs) {
    if (params.numRuns === 0) continue;
    let details = await fc.check(property, params);
    if (details.failed && details.interrupted && details.counterexamplePath)
      // The time ran out while shrinking: finish shrinking from where it stopped.
      details = await fc.check(property, { seed: details.seed, path: details.counterexamplePath });
    if (details.failed && details.counterexample) {
      const input = details.counterexample[0];
      // Run the shrunk input once more so that the finding describes it (not the last shrink tried).
      await predicate(input);
      saveCorpus(opts.target, `FINDING: ${lastFinding}`, input);
      return {
        target: opts.label ?? opts.target,
        executions,
        seed: details.seed,
        failure: { input, finding: lastFinding },
        saved: saved + 1,
        kinds: sortedKinds(kindCounts),
      };
    }
  }
  return { target: opts.label ?? opts.target, executions, seed, saved, kinds: sortedKinds(kindCounts) };
}

function sortedKinds(counts: Map<string, number>): [string, number][] {
  return [...counts].sort((a, b) => b[1] - a[1]);
}

/** Prints a run's summary and, for `npm run fuzz`, writes it where the script collects it. */
export function report(result: FuzzResult<object>) {
  const line = `[fuzz] ${result.target}: ${result.executions} executions, seed ${result.seed}, ${result.saved} new corpus file(s), ${result.failure ? `FINDING: ${result.failure.finding}\n  input: ${JSON.stringify(result.failure.input)}` : 'no finding'}`;
  const kinds = result.kinds
    .slice(0, 12)
    .map(([k, n]) => `    ${n}\t${k.slice(0, 140)}`)
    .join('\n');
  process.stdout.write(`${line}\n${kinds}\n`);
  const dir = process.env.GATEHOUSE_FUZZ_REPORT;
  if (dir) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${result.target.replace(/[^a-z0-9-]+/gi, '-')}.json`), JSON.stringify(result));
  }
}
