// CPU pinning for benchmarks (bench:api --pin): the server under test on one set of CPUs, the
// load generator on another. Unpinned on a 2-CPU VM, a server's CPU per GET rose by half or more
// (62 → 90-120 µs) in windows of several seconds, and the alternating rounds of a ratio fell into
// different windows; pinned, it stayed within a few per cent. Pinning also keeps a server's own
// helper threads off the second CPU, which costs writes (docs/benchmarks.md, "CPU pinning").
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * The plan for this machine: `{ server, load, describe }` with taskset CPU lists, or
 * `{ server: undefined, load: undefined, describe }` when pinning is off, impossible (one CPU) or
 * taskset is missing (util-linux).
 */
export function cpuPlan(wanted = true) {
  const n = availableParallelism();
  if (!wanted) return { describe: 'not pinned' };
  if (n < 2) return { describe: 'not pinned (one CPU)' };
  if (spawnSync('taskset', ['-c', '0', 'true']).status !== 0) return { describe: 'not pinned (no taskset)' };
  const server = n === 2 ? '1' : `1-${n - 1}`;
  return { server, load: '0', describe: `servers on CPU ${server}, load generator on CPU 0 (taskset)` };
}

/** The command and arguments that run `cmd args` on `cpus` (a taskset list), or as they are. */
export function pinned(cpus, cmd, args) {
  return cpus ? ['taskset', ['-c', cpus, cmd, ...args]] : [cmd, args];
}
