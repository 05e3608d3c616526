import { describe, expect, it } from 'vitest';
import { Jobs } from '../../src/core/jobs.js';

/*
 * The one background-job helper (src/core/jobs.ts) that every service's interval work runs on:
 * no overlapping runs, failures reported with the job's name, start and stop in one place.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('background jobs', () => {
  it('run only once started, never two runs of one job at once, and stop waits for the run', async () => {
    const jobs = new Jobs(() => undefined);
    let running = 0;
    let most = 0;
    let runs = 0;
    let finished = 0;
    jobs.every('slow', 5, async () => {
      runs++;
      running++;
      most = Math.max(most, running);
      await sleep(40);
      running--;
      finished++;
    });
    await sleep(30);
    expect(runs).toBe(0); // added, not started
    jobs.start();
    await sleep(120);
    expect(runs).toBeGreaterThan(0);
    expect(most).toBe(1);
    await jobs.stop();
    expect(running).toBe(0);
    expect(finished).toBe(runs);
    const after = runs;
    await sleep(40);
    expect(runs).toBe(after);
  });

  it('report a failure with the name and run again at the next tick', async () => {
    const failures: [string, string][] = [];
    const jobs = new Jobs((err, name) => failures.push([name, (err as Error).message]));
    let runs = 0;
    jobs.every('flaky', 10, () => {
      runs++;
      if (runs === 1) throw new Error('first run fails');
    });
    jobs.start();
    while (runs < 3) await sleep(5);
    await jobs.stop();
    expect(failures).toEqual([['flaky', 'first run fails']]);
  });

  it('abort the signal of a run under way when stopping; refuse a second job of the same name', async () => {
    const jobs = new Jobs(() => undefined);
    let aborted = false;
    jobs.every(
      'long',
      60_000,
      async (signal) => {
        while (!signal.aborted) await sleep(5);
        aborted = true;
      },
      { runAtStart: true },
    );
    expect(() => jobs.every('long', 10, () => undefined)).toThrow(/exists already/);
    jobs.start();
    await sleep(20);
    expect(jobs.isRunning('long')).toBe(true);
    await jobs.stop();
    expect(aborted).toBe(true);
    expect(() => jobs.every('late', 10, () => undefined)).toThrow(/after the service stopped/);
  });

  it('a job added after start starts at once; runNow runs it and shares a run under way', async () => {
    const jobs = new Jobs(() => undefined);
    jobs.start();
    let runs = 0;
    jobs.every('later', 60_000, async () => {
      runs++;
      await sleep(20);
    });
    await Promise.all([jobs.runNow('later'), jobs.runNow('later')]);
    expect(runs).toBe(1);
    await jobs.stop();
  });
});
