import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { type SandboxJob, type SandboxResult, workerSource } from './worker.js';

/*
 * Scripts run in worker threads, never on the service's event loop: a script that spins until its
 * time limit occupies one worker, while the service goes on answering other requests. Each worker
 * runs one job at a time; jobs wait in a bounded queue. Every wait has a bound, each its own:
 * - the wait for a free worker (QUEUE_WAIT_MS): then the limit 'queue';
 * - the script's own running time, its time limit, counted in CPU time by the worker (worker.ts),
 *   so a busy host's wait for a CPU never counts as the script's: then the limit 'time';
 * - the run's wall-clock time (wallTimeFor: many times the time limit), for a host so busy that
 *   the script cannot get its time: then the limit 'busy';
 * - the worker's answer (the wall bound + WATCHDOG_GRACE_MS): a worker stuck in one native call
 *   is terminated and replaced: then 'time'.
 * 'queue' and 'busy' are the host's doing, not the script's: the sign-in hook answers them with
 * 503 (try again), never with its fail-safe deny (runner.ts).
 */

/** How long a job may wait for a free worker before it fails safe. */
export const QUEUE_WAIT_MS = 2000;
/**
 * How long a run may wait while no worker has started yet (loading QuickJS takes a few seconds on
 * a loaded machine): the first run after start-up must not fail safe merely because it came first.
 */
export const COLD_START_WAIT_MS = 15_000;
/** Jobs waiting at most; more fail at once (limit 'queue'). */
export const QUEUE_MAX = 1000;
/** Beyond a run's wall-clock bound, how long the worker may take to answer before it is terminated. */
export const WATCHDOG_GRACE_MS = 1000;

/**
 * The wall-clock bound of a run with this time limit: ten times the limit and two seconds more.
 * The workers run at nice 5; beside busy processes at nice 0 a thread gets about a quarter of a
 * core, so a script needs up to four times its CPU time in wall time before it reaches its limit.
 */
export const wallTimeFor = (timeMs: number) => timeMs * 10 + 2000;

/** Limits the host's load made a run hit (as opposed to the script's own). */
export const HOST_LIMITS: readonly string[] = ['queue', 'busy'];

export type Job = Omit<SandboxJob, 'id' | 'wallMs'>;

interface Pending {
  job: SandboxJob;
  resolve: (r: SandboxResult) => void;
  queued: ReturnType<typeof setTimeout> | undefined;
}

class Slot {
  worker: Worker | undefined;
  ready = false;
  current: Pending | undefined;
  watchdog: ReturnType<typeof setTimeout> | undefined;
}

const failed = (id: number, limit: string, error: string): SandboxResult => ({
  id,
  result: undefined,
  console: [],
  error,
  compileError: false,
  limits: limit ? [limit] : [],
  durationMs: 0,
});

export class SandboxPool {
  private readonly slots: Slot[];
  private readonly queue: Pending[] = [];
  private nextId = 1;
  private readonly quickjs = createRequire(import.meta.url).resolve('quickjs-emscripten');
  /** Workers replaced after a watchdog or a crash (for tests and logs). */
  restarts = 0;

  constructor(size = Math.max(1, Math.min(2, availableParallelism()))) {
    this.slots = Array.from({ length: size }, () => new Slot());
    for (const s of this.slots) this.spawn(s);
  }

  run(job: Job): Promise<SandboxResult> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      const p: Pending = { job: { ...job, id, wallMs: wallTimeFor(job.timeMs) }, resolve, queued: undefined };
      const free = this.slots.find((s) => s.ready && !s.current);
      if (free) return this.start(free, p);
      if (this.queue.length >= QUEUE_MAX)
        return resolve(failed(id, 'queue', 'too many scripts waiting to run'));
      p.queued = setTimeout(
        () => {
          const i = this.queue.indexOf(p);
          if (i >= 0) this.queue.splice(i, 1);
          this.holdOpen();
          resolve(failed(id, 'queue', 'no sandbox became free in time'));
        },
        this.slots.some((s) => s.ready) ? QUEUE_WAIT_MS : COLD_START_WAIT_MS,
      );
      p.queued.unref();
      this.queue.push(p);
      this.holdOpen();
    });
  }

  /** Ends every worker (tests; the workers never keep the process alive anyway). */
  async close(): Promise<void> {
    for (const s of this.slots) {
      const w = s.worker;
      s.worker = undefined;
      s.ready = false;
      if (w) await w.terminate();
    }
  }

  private spawn(slot: Slot) {
    const w = new Worker(workerSource(), {
      eval: true,
      workerData: { quickjs: this.quickjs },
      // The worker's code is CommonJS text: none of the process's flags (--input-type=module would
      // make it ESM, and the worker would fail at every start).
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: 256 },
    });
    slot.worker = w;
    slot.ready = false;
    w.on('message', (m: SandboxResult & { ready?: boolean; fatal?: string }) => {
      if (slot.worker !== w) return;
      if (m.ready) {
        slot.ready = true;
        this.next(slot);
        return;
      }
      const p = slot.current;
      if (!p || p.job.id !== m.id) return;
      this.finish(slot, m.fatal ? failed(m.id, '', 'the sandbox failed; the run was abandoned') : m);
    });
    const replace = () => {
      if (slot.worker !== w) return;
      slot.worker = undefined;
      slot.ready = false;
      const p = slot.current;
      if (p) this.finish(slot, failed(p.job.id, '', 'the sandbox failed; the run was abandoned'));
      this.restarts++;
      this.spawn(slot);
    };
    w.on('error', replace);
    w.on('exit', replace);
    this.holdOpen();
  }

  /**
   * A worker keeps the process alive only while a run waits for it: an idle pool never keeps a
   * process from ending (a CLI command, a benchmark), and a process awaiting a run never ends
   * under it. (Adding a 'message' listener refs the worker's port again, so this runs after.)
   */
  private holdOpen() {
    const waiting = this.queue.length > 0;
    for (const s of this.slots) {
      if (s.current || waiting) s.worker?.ref();
      else s.worker?.unref();
    }
  }

  private start(slot: Slot, p: Pending) {
    if (p.queued) clearTimeout(p.queued);
    slot.current = p;
    slot.watchdog = setTimeout(() => {
      // The worker did not answer in time (its interrupt handler could not stop it): replace it.
      const w = slot.worker;
      slot.worker = undefined;
      slot.ready = false;
      this.finish(slot, failed(p.job.id, 'time', 'time limit exceeded; the sandbox was terminated'));
      this.restarts++;
      if (w) void w.terminate();
      this.spawn(slot);
    }, p.job.wallMs + WATCHDOG_GRACE_MS);
    slot.watchdog.unref();
    slot.worker?.postMessage(p.job);
    this.holdOpen();
  }

  private finish(slot: Slot, r: SandboxResult) {
    const p = slot.current;
    slot.current = undefined;
    if (slot.watchdog) clearTimeout(slot.watchdog);
    slot.watchdog = undefined;
    p?.resolve(r);
    this.next(slot);
    this.holdOpen();
  }

  private next(slot: Slot) {
    if (!slot.ready || slot.current) return;
    const p = this.queue.shift();
    if (p) this.start(slot, p);
  }
}

// module-state: true process singleton: worker threads are a process resource, sized to the machine's CPUs and shared by every service in the process.
let shared: SandboxPool | undefined;
/** The process's pool, made at first use. */
export function sandboxPool(): SandboxPool {
  shared ??= new SandboxPool();
  return shared;
}
