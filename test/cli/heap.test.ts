import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { printedKey, serve } from './run.js';

/*
 * The CLI turns V8's allocation-site pretenuring off before any command loads its program
 * (src/cli/main.ts): with it, a server process could settle for its whole life into allocating
 * requests' objects in the old generation, at half its GET rate. V8 reports each pretenuring
 * decision under --trace-pretenuring-statistics; a server that makes none has the option off. The
 * same start and writes with the option on gave about 50 decisions (`=> tenure`) and many more
 * statistics lines.
 */
describe('gatehouse serve runs without allocation-site pretenuring', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-heap-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('makes no pretenuring decision through start-up and 300 writes', async () => {
    const served = await serve(
      ['--database', join(dir, 'g.db'), '--listen', '127.0.0.1:0', '--log-level', 'info'],
      {},
      ['--trace-pretenuring-statistics'],
    );
    try {
      const key = printedKey(served.stdout());
      expect(key).toBeDefined();
      for (let i = 0; i < 300; i++) {
        const res = await fetch(`${served.url}/users`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: '{}',
        });
        expect(res.status).toBe(201);
      }
    } finally {
      await served.stop();
    }
    expect(served.stdout().match(/pretenuring: .*/g) ?? []).toEqual([]);
  });
});
