#!/usr/bin/env node
/**
 * npm run fuzz -- [--seconds N] [--target request|response|all] [--seed S]
 *
 * Runs the differential fuzzers of the proxy's HTTP/1.1 handling (test/security/fuzz/) for N
 * seconds in all (split over the targets), through Vitest, which runs the TypeScript sources as
 * they are. Prints the executions per target and any counterexample (shrunk), writes new
 * interesting inputs and every counterexample to test/security/fuzz/corpus/<target>/, and exits
 * non-zero on a finding. The request target uses the service on SQLite unless
 * GATEHOUSE_TEST_BACKENDS says otherwise.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    target: { type: 'string', default: 'all' },
    seed: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(
    'npm run fuzz -- [--seconds N (default 60)] [--target request|response|all] [--seed S]\n',
  );
  process.exit(0);
}
const seconds = Number(values.seconds);
if (!(seconds > 0)) {
  process.stderr.write('--seconds must be a positive number\n');
  process.exit(2);
}
if (!['request', 'response', 'all'].includes(values.target)) {
  process.stderr.write('--target must be request, response or all\n');
  process.exit(2);
}
if (values.seed !== undefined && !/^-?\d+$/.test(values.seed)) {
  process.stderr.write('--seed must be an integer\n');
  process.exit(2);
}

const reportDir = mkdtempSync(join(tmpdir(), 'gatehouse-fuzz-'));
const files =
  values.target === 'all' ? ['test/security/fuzz/'] : [`test/security/fuzz/${values.target}.test.ts`];
const run = spawnSync('npx', ['vitest', 'run', ...files], {
  stdio: 'inherit',
  env: {
    ...process.env,
    GATEHOUSE_FUZZ_SECONDS: String(seconds),
    GATEHOUSE_FUZZ_TARGET: values.target,
    ...(values.seed !== undefined ? { GATEHOUSE_FUZZ_SEED: values.seed } : {}),
    GATEHOUSE_FUZZ_REPORT: reportDir,
    GATEHOUSE_TEST_BACKENDS: process.env.GATEHOUSE_TEST_BACKENDS ?? 'sqlite',
  },
});

// New corpus files in the layout Biome checks (the suite writes plain JSON.stringify output).
spawnSync('npx', ['biome', 'format', '--write', 'test/security/fuzz/corpus'], { stdio: 'ignore' });

let findings = 0;
process.stdout.write('\nFuzz summary\n');
for (const name of readdirSync(reportDir).sort()) {
  const r = JSON.parse(readFileSync(join(reportDir, name), 'utf8'));
  process.stdout.write(
    `  ${r.target}: ${r.executions} executions, seed ${r.seed}, ${r.saved} new corpus file(s)\n`,
  );
  if (r.failure) {
    findings++;
    process.stdout.write(
      `    FINDING: ${r.failure.finding}\n    input: ${JSON.stringify(r.failure.input)}\n`,
    );
  }
}
rmSync(reportDir, { recursive: true, force: true });
process.stdout.write(findings ? `${findings} finding(s)\n` : 'no finding\n');
process.exit(findings > 0 || run.status !== 0 ? 1 : 0);
