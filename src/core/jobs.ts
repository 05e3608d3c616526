/**
 * A service's background jobs: work that runs every so often while the service is up (pruning,
 * sweeps, metrics). The service object owns one `Jobs` (ServiceContext.jobs), which starts them
 * all when the server is ready and stops them all when it closes, so no job outlives its service
 * and two services in one process never share one.
 *
 * Each job: never two runs of it at once (a tick that finds the last run still going is skipped),
 * a failure is reported with the job's name and the job runs again at its next tick, and stopping
 * aborts the signal a run was given and waits for runs under way. Timers never keep the process
 * alive.
 */

/** One run of a job; `signal` is aborted when the service stops, so a long run can end early. */
export type Job = (signal: AbortSignal) => Promise<unknown> | unknown;

export interface JobOptions {
  /** Run once as soon as the job starts, not only after the first interval. */
  runAtStart?: boolean;
}

interface Entry {
  readonly name: string;
  readonly intervalMs: number;
  readonly job: Job;
  readonly runAtStart: boolean;
  timer?: ReturnType<typeof setInterval>;
  running?: Promise<void>;
}

/** Told about a run that failed: the error and the job's name. */
export type JobFailure = (err: unknown, name: string) => void;

export class Jobs {
  private readonly entries = new Map<string, Entry>();
  private readonly abort = new AbortController();
  private state: 'idle' | 'started' | 'stopped' = 'idle';

  constructor(private readonly failed: JobFailure) {}

  /**
   * Runs `job` every `intervalMs` while the service is up. Added after start, it starts at once.
   * Names are unique within a service: they name the job in logs.
   */
  every(name: string, intervalMs: number, job: Job, opts: JobOptions = {}): void {
    if (this.entries.has(name)) throw new Error(`a background job named "${name}" exists already`);
    if (this.state === 'stopped') throw new Error(`background job "${name}" added after the service stopped`);
    if (!(intervalMs > 0)) throw new Error(`background job "${name}": the interval must be positive`);
    const entry: Entry = { name, intervalMs, job, runAtStart: opts.runAtStart === true };
    this.entries.set(name, entry);
    if (this.state === 'started') this.schedule(entry);
  }

  /** Starts every job added so far (and every one added later); a second call does nothing. */
  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'started';
    for (const entry of this.entries.values()) this.schedule(entry);
  }

  /**
   * Runs the job now unless a run of it is under way, and resolves when that run ends (tests,
   * shutdown work). Never rejects: a failure is reported like a scheduled run's.
   */
  runNow(name: string): Promise<void> {
    const entry = this.entries.get(name);
    if (!entry) throw new Error(`no background job named "${name}"`);
    return this.run(entry);
  }

  /** Stops every job: no new runs; aborts and waits for the runs under way. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    this.abort.abort();
    for (const entry of this.entries.values()) clearInterval(entry.timer);
    await Promise.all([...this.entries.values()].map((e) => e.running));
  }

  /** The jobs' names (what a service runs in the background). */
  get names(): string[] {
    return [...this.entries.keys()];
  }

  /** Is the job between the start and the end of a run? */
  isRunning(name: string): boolean {
    return this.entries.get(name)?.running !== undefined;
  }

  get stopped(): boolean {
    return this.state === 'stopped';
  }

  private schedule(entry: Entry): void {
    entry.timer = setInterval(() => void this.run(entry), entry.intervalMs);
    entry.timer.unref();
    if (entry.runAtStart) void this.run(entry);
  }

  private run(entry: Entry): Promise<void> {
    if (this.state === 'stopped') return entry.running ?? Promise.resolve();
    if (entry.running) return entry.running;
    // Started on the next microtask, so `running` is set before the run can end (even when the
    // job throws at once).
    const run = Promise.resolve()
      .then(() => entry.job(this.abort.signal))
      .then(
        () => undefined,
        (err: unknown) => {
          try {
            this.failed(err, entry.name);
          } catch {
            // A report that fails must not become an unhandled rejection of the timer.
          }
        },
      )
      .finally(() => {
        entry.running = undefined;
      });
    entry.running = run;
    return run;
  }
}
