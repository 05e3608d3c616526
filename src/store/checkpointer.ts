import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * SQLite's checkpoints, off the event loop. In WAL mode a commit only appends pages to the -wal
 * file; a checkpoint copies them back into the database file and syncs both. SQLite runs one
 * inside the commit that takes the WAL past `wal_autocheckpoint` pages, and better-sqlite3 is
 * synchronous, so every request of the service waited for those file writes and syncs.
 *
 * Here a worker thread with a connection of its own checkpoints every CHECKPOINT_EVERY_MS, in
 * PASSIVE mode: it copies what is committed without waiting for, or blocking, the writer or any
 * reader. The writer's own automatic checkpoint stays as a bound, at WRITER_CHECKPOINT_PAGES: SQLite
 * restarts the WAL from its beginning only when a write finds every frame copied back, which a
 * steady stream of writes may never let the worker see; the writer's checkpoint then finds most
 * pages copied already. If the worker stops, the writer goes back to SQLite's default.
 */
/**
 * How often the worker checkpoints while the WAL grows. The writer's own checkpoint at
 * WRITER_CHECKPOINT_PAGES copies what the worker has not yet copied, on the event loop: under
 * POST /users at 17,000 writes/s the WAL reached that bound about three times a second, and with a
 * pass every 250 ms the writer still found up to three quarters of it to copy (p99 11-23 ms, max
 * 22-43 ms); every 50 ms it finds a few hundred frames (p99 5-8 ms, max 10-15 ms) at the same rate
 * (docs/benchmarks.md, "The writer's checkpoint, made small").
 */
export const CHECKPOINT_EVERY_MS = 50;
/**
 * How often it looks while nothing is written: a pass that finds the WAL as the last one left it
 * waits this long for the next, so an idle service wakes the thread four times a second.
 */
export const CHECKPOINT_IDLE_MS = 250;
/** The writer's own checkpoint threshold while the worker runs (SQLite's default is 1,000 pages). */
export const WRITER_CHECKPOINT_PAGES = 10_000;
/** SQLite's default, for the writer when the worker is gone. */
export const DEFAULT_CHECKPOINT_PAGES = 1_000;

export interface Checkpointer {
  /** Stops the worker and closes its connection; the writer, closed after it, checkpoints last. */
  close(): Promise<void>;
}

/**
 * The worker's code, run as the text of this function (like the scripts' sandbox, src/scripts/
 * worker.ts): the same in the built service and under the test runner, which runs TypeScript.
 */
function checkpointWorker(): void {
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const { driver, location, everyMs, idleMs } = threads.workerData as {
    driver: string;
    location: string;
    everyMs: number;
    idleMs: number;
  };
  const Database = require(driver) as typeof import('better-sqlite3');
  const db = new Database(location);
  const port = threads.parentPort as import('node:worker_threads').MessagePort;
  // The WAL's length in frames at the last pass: unchanged means nothing was written since.
  let lastLog = -1;
  let timer: NodeJS.Timeout;
  const pass = () => {
    let log = lastLog;
    try {
      const [result] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
      log = result?.log ?? -1;
    } catch {
      // A locked or vanished file now: the next turn tries again, and the writer's bound holds.
    }
    const idle = log === lastLog;
    lastLog = log;
    timer = setTimeout(pass, idle ? idleMs : everyMs);
  };
  timer = setTimeout(pass, everyMs);
  port.on('message', (m: unknown) => {
    if (m !== 'close') return;
    clearTimeout(timer);
    db.close();
    port.close();
  });
}

/**
 * Starts the worker for the SQLite file at `location` (an absolute path). `stopped` is called once
 * if the worker ends by itself (it could not open the file, or it failed): the caller gives the
 * writer back its own checkpoints.
 */
export function startCheckpointer(location: string, stopped: (err?: Error) => void): Checkpointer {
  const worker = new Worker(`(${checkpointWorker.toString()})()`, {
    eval: true,
    workerData: {
      driver: createRequire(import.meta.url).resolve('better-sqlite3'),
      location,
      everyMs: CHECKPOINT_EVERY_MS,
      idleMs: CHECKPOINT_IDLE_MS,
    },
    // CommonJS text: none of the process's flags (--input-type=module would make it ESM).
    execArgv: [],
  });
  // It must not keep a process alive that has nothing else to do.
  worker.unref();
  let closing = false;
  let lastError: Error | undefined;
  const exited = new Promise<void>((resolve) => {
    worker.once('error', (e) => {
      lastError = e;
    });
    worker.once('exit', () => {
      if (!closing) stopped(lastError);
      resolve();
    });
  });
  return {
    close: () => {
      if (!closing) {
        closing = true;
        worker.postMessage('close');
      }
      return exited;
    },
  };
}
