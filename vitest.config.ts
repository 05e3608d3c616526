import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Vitest's default is one worker per CPU but one, which on the 2-CPU CI machine is a single
    // worker: the suite ran file after file (34 min, of which most test files spend waiting on
    // child processes, browsers, PostgreSQL and timers). Files are independent (each its own
    // database, ports, temporary directories), so run as many as there are CPUs.
    maxWorkers: Math.max(availableParallelism(), 2),
  },
});
