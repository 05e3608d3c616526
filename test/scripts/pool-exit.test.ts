import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The sandbox pool's workers keep a process alive exactly while a run waits for them: a process
 * that awaits a run gets its answer (it does not end under it), and once the pool is idle the
 * process ends by itself (a CLI command or a benchmark must not hang). Run in a process of its
 * own over the built code, since the test runner keeps its own process alive.
 */

const POOL = fileURLToPath(new URL('../../dist/scripts/pool.js', import.meta.url));

const program = `
import { sandboxPool } from ${JSON.stringify(POOL)};
const job = (source) => ({ source, input: '{"n":20}', data: '{}', timeMs: 1000, memoryBytes: 16 << 20,
  stackBytes: 256 << 10, outputBytes: 65536, checkCompile: false, callHook: true });
const pool = sandboxPool();
const first = await pool.run(job('function hook(i) { return { n: i.n + 1 }; }'));
// A slow run started from a timer: nothing else keeps the process alive while it waits.
setTimeout(async () => {
  const slow = await pool.run(job('function hook(i) { const t = Date.now(); while (Date.now() - t < 300) {} return i.n; }'));
  process.stdout.write(JSON.stringify([first.result, slow.result]));
}, 10);
`;

describe('the sandbox pool and the process it lives in', () => {
  it('answers a process awaiting a run, then lets it end by itself', () => {
    const t0 = Date.now();
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', program], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.signal, `did not end by itself: ${r.stderr}`).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(['{"n":21}', '20']);
    expect(Date.now() - t0).toBeLessThan(15_000);
  });
});
