// Why ~430 lines: the worker thread runs this file's functions as source text joined by workerSource(),
// and they call each other by name: they stay in one self-contained module (see below).
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from 'quickjs-emscripten';

/*
 * The code of a sandbox worker thread. The functions below are sent to the worker as source text
 * (Function.prototype.toString, joined by workerSource() for pool.ts), so each must be
 * self-contained: no imports (only types), no module-level names other than these functions,
 * which call each other by name; the worker loads quickjs-emscripten with `require` from the path
 * the pool resolved. The same text runs whether the service runs from dist (tsc) or from src
 * (Vitest).
 *
 * Per run: the runtime of the worker (reused while healthy, and recreated after a memory or
 * stack limit was hit) gets the job's limits, then a fresh context runs the prelude, the script,
 * and the script's `hook(input)`. The context is disposed after the run, so nothing a script
 * does (globals, polluted prototypes) survives into the next run.
 */

/** What the pool sends for one run. */
export interface SandboxJob {
  id: number;
  source: string;
  /** JSON text of the hook's input. */
  input: string;
  /** JSON text of what the host API gives: {user, groups, tenant}. */
  data: string;
  /** The script's own running time allowed: time on a CPU, not waiting for one. */
  timeMs: number;
  /**
   * Wall-clock bound of the run, for a host too busy to give the script its time: stopped then
   * with the limit 'busy' (not the script's fault) rather than 'time'.
   */
  wallMs: number;
  memoryBytes: number;
  stackBytes: number;
  outputBytes: number;
  /** Report a syntax error as compile failure (POST /scripts/test). */
  checkCompile: boolean;
  /** Call hook(input) after evaluating the script (false: only load it). */
  callHook: boolean;
}

/** What the worker answers. `result` is JSON text made inside the sandbox; the host only parses it. */
export interface SandboxResult {
  id: number;
  result: string | undefined;
  console: string[];
  error: string;
  compileError: boolean;
  limits: string[];
  durationMs: number;
}

/** The worker's source text: every function below, then the call that starts it. */
export function workerSource(): string {
  const parts = [
    threadCpuClock,
    preludeSource,
    prepareContext,
    errorText,
    armLimits,
    runInContext,
    afterRun,
    runJob,
  ];
  return `${parts.map((f) => f.toString()).join('\n')}\n(${sandboxWorker.toString()})()`;
}

/** A worker's QuickJS state: the module, the runtime (reused while healthy), a warm context. */
interface SandboxBox {
  mod: QuickJSWASMModule | undefined;
  rt: QuickJSRuntime | undefined;
  prepared: Prepared | undefined;
  cpuMs: () => number | undefined;
}

/** What the host's log function of a context writes to: the run under way. */
interface RunState {
  out: SandboxResult;
  outputBytes: number;
  outputUsed: number;
  outputHit: boolean;
}

/** A fresh context with the prelude run, made while the worker is idle (a warm sandbox). */
interface Prepared {
  vm: QuickJSContext;
  control: QuickJSHandle;
  handles: QuickJSHandle[];
  state: { run: RunState | undefined };
}

/** A run's clock: started when the script's own code starts; why it was stopped, if it was. */
interface RunClock {
  begin(): void;
  timedOut: boolean;
  starved: boolean;
}

export function sandboxWorker(): void {
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const port = threads.parentPort;
  const qjsPath = (threads.workerData as { quickjs: string }).quickjs;
  const qjs = require(qjsPath) as typeof import('quickjs-emscripten');
  // A lower CPU priority for this thread (on Linux, priority 0 names the calling thread): spinning
  // scripts yield the cores to the event loop and the database.
  try {
    (require('node:os') as typeof import('node:os')).setPriority(0, 5);
  } catch {
    // not permitted here: the worker runs at the process's priority
  }
  const box: SandboxBox = { mod: undefined, rt: undefined, prepared: undefined, cpuMs: threadCpuClock() };
  qjs.newQuickJSWASMModule().then(
    (m: QuickJSWASMModule) => {
      box.mod = m;
      // One run before the first job, so a job does not pay for the WebAssembly warming up.
      try {
        runJob(box, {
          id: 0,
          source: 'function hook(i) { console.log(JSON.stringify(i)); return [i, gatehouse.user()]; }',
          input: '{"a":[1,"x"]}',
          data: '{"user":{},"groups":[],"tenant":{}}',
          timeMs: 1000,
          wallMs: 60_000,
          memoryBytes: 16 << 20,
          stackBytes: 256 << 10,
          outputBytes: 65536,
          checkCompile: true,
          callHook: true,
        });
        box.prepared = prepareContext(box);
      } catch {
        process.exit(1);
      }
      port?.on('message', (job: SandboxJob) => {
        let res: SandboxResult;
        try {
          res = runJob(box, job);
        } catch (e) {
          // The WebAssembly module itself failed (an abort): this worker is done; the pool replaces it.
          port.postMessage({ id: job.id, fatal: String(e) });
          process.exit(1);
        }
        port.postMessage(res);
        if (!box.mod) process.exit(0);
        // Ready the next run's context while idle.
        try {
          box.prepared = prepareContext(box);
        } catch {
          process.exit(1);
        }
      });
      port?.postMessage({ ready: true });
    },
    (e: unknown) => {
      port?.postMessage({ fatal: String(e) });
    },
  );
}

/**
 * This thread's time on a CPU in ms (Linux schedstat: nanoseconds run, then nanoseconds waited on
 * a run queue), so a script's time limit counts its own running, not the waits of a busy host for
 * a CPU. The file is opened once, by this thread, so it names this thread. Where there is none,
 * the clock answers undefined and the time limit falls back to the wall clock.
 */
function threadCpuClock(): () => number | undefined {
  const fs = require('node:fs') as typeof import('node:fs');
  let schedFd: number | undefined;
  try {
    schedFd = fs.openSync('/proc/thread-self/schedstat', 'r');
  } catch {
    schedFd = undefined;
  }
  const schedBuf = Buffer.alloc(128);
  return () => {
    if (schedFd === undefined) return undefined;
    try {
      const n = fs.readSync(schedFd, schedBuf, 0, schedBuf.length, 0);
      const ns = Number(schedBuf.toString('latin1', 0, n).split(' ')[0]);
      return Number.isFinite(ns) ? ns / 1e6 : undefined;
    } catch {
      return undefined;
    }
  };
}

/**
 * The prelude runs first in every fresh context: it keeps its own references to JSON and the
 * host's log function, builds `console` and `gatehouse`, and returns the control function the
 * host calls ('data' sets what the host API answers, 'call' runs hook(input)). The script can
 * replace any global afterwards; the host holds the control function's handle.
 */
function preludeSource(): string {
  return `(function (hostLog) {
    'use strict';
    const parse = JSON.parse, stringify = JSON.stringify, freeze = Object.freeze;
    let dataText = '{"user":null,"groups":[],"tenant":{}}';
    const fmt = (args) => {
      let s = '';
      for (let i = 0; i < args.length; i++) {
        const a = args[i];
        let t;
        if (typeof a === 'string') t = a;
        else { try { t = stringify(a); } catch (e) { t = undefined; } if (t === undefined) t = '' + a; }
        s += (i > 0 ? ' ' : '') + t;
      }
      return s;
    };
    const line = (level) => function () { hostLog(level, fmt(arguments)); };
    globalThis.console = freeze({ log: line('info'), info: line('info'), warn: line('warn'), error: line('error'), debug: line('info') });
    globalThis.gatehouse = freeze({
      log: line('info'),
      user: () => parse(dataText).user,
      groups: () => parse(dataText).groups,
      tenant: () => parse(dataText).tenant,
    });
    return function (op, text) {
      if (op === 'data') { dataText = text; return undefined; }
      if (typeof globalThis.hook !== 'function') throw new TypeError('the script defines no function hook(input)');
      const out = globalThis.hook(parse(text));
      if (out !== null && typeof out === 'object' && typeof out.then === 'function')
        throw new TypeError('hook(input) must return a value, not a promise');
      return out === undefined ? undefined : stringify(out);
    };
  })`;
}

/** A fresh context of the box's runtime (made if needed) with the prelude run. */
function prepareContext(box: SandboxBox): Prepared {
  if (!box.mod) throw new Error('sandbox not ready');
  if (!box.rt) box.rt = box.mod.newRuntime();
  const vm = box.rt.newContext();
  const state: Prepared['state'] = { run: undefined };
  const log = vm.newFunction('log', (levelH, textH) => {
    const r = state.run;
    if (!r) return;
    const lineText = `${vm.getString(levelH)}: ${vm.getString(textH)}`;
    r.outputUsed += lineText.length + 1;
    if (r.outputUsed > r.outputBytes) {
      r.outputHit = true;
      throw new Error('output limit exceeded');
    }
    r.out.console.push(lineText);
  });
  const pre = vm.evalCode(preludeSource(), 'prelude.js');
  if (pre.error) {
    pre.error.dispose();
    throw new Error('the prelude failed');
  }
  const made = vm.callFunction(pre.value, vm.undefined, log);
  if (made.error) {
    made.error.dispose();
    throw new Error('the prelude failed');
  }
  return { vm, control: made.value, handles: [log, pre.value, made.value], state };
}

function errorText(vm: QuickJSContext, h: QuickJSHandle): { text: string; name: string } {
  const e = vm.dump(h) as unknown;
  if (e && typeof e === 'object') {
    const o = e as { name?: unknown; message?: unknown };
    const name = typeof o.name === 'string' ? o.name : 'Error';
    return { name, text: `${name}: ${typeof o.message === 'string' ? o.message : ''}` };
  }
  return { name: 'Error', text: `uncaught ${String(e)}` };
}

/**
 * The job's limits on the runtime. The time limit counts this thread's CPU time (read at most
 * once a millisecond) from begin(), not the host's set-up; the wall clock only bounds a run that a
 * busy host cannot give its time ('busy').
 */
function armLimits(runtime: QuickJSRuntime, job: SandboxJob, cpuMs: () => number | undefined): RunClock {
  runtime.setMemoryLimit(job.memoryBytes);
  runtime.setMaxStackSize(job.stackBytes);
  let started = false;
  let cpuStart = 0;
  let wallStart = 0;
  let lastCheck = 0;
  const clock: RunClock = {
    timedOut: false,
    starved: false,
    begin() {
      started = true;
      wallStart = Date.now();
      cpuStart = cpuMs() ?? wallStart;
    },
  };
  runtime.setInterruptHandler(() => {
    if (!started || clock.timedOut || clock.starved) return clock.timedOut || clock.starved;
    const now = Date.now();
    if (now === lastCheck) return false;
    lastCheck = now;
    const cpu = cpuMs();
    const used = cpu === undefined ? now - wallStart : cpu - cpuStart;
    if (used > job.timeMs) clock.timedOut = true;
    else if (now - wallStart > job.wallMs) clock.starved = true;
    return clock.timedOut || clock.starved;
  });
  return clock;
}

/** Runs the job in a warm context: data, (compile check), the script, hook(input); fills `state.out`. */
function runInContext(p: Prepared, job: SandboxJob, state: RunState, clock: RunClock): void {
  const { vm, control, handles } = p;
  const out = state.out;
  const keep = (h: QuickJSHandle) => {
    handles.push(h);
    return h;
  };
  const limitFor = (name: string, text: string) => {
    if (clock.starved) return 'busy';
    if (clock.timedOut || text.endsWith('interrupted')) return 'time';
    if (state.outputHit) return 'output';
    if (text.includes('stack overflow')) return 'stack';
    if (text.includes('out of memory') || name === 'null') return 'memory';
    return '';
  };
  const fail = (h: QuickJSHandle) => {
    const { name, text } = errorText(vm, h);
    h.dispose();
    const limit = limitFor(name, text);
    if (limit) {
      out.limits.push(limit);
      out.error =
        limit === 'busy'
          ? 'stopped before its time limit: the host was too busy to run it'
          : `${limit} limit exceeded`;
    } else out.error = text.slice(0, 2048);
    return name;
  };
  const set = vm.callFunction(
    control,
    vm.undefined,
    keep(vm.newString('data')),
    keep(vm.newString(job.data)),
  );
  if (set.error) {
    fail(set.error);
    return;
  }
  set.value.dispose();
  clock.begin();
  if (job.checkCompile) {
    const compiled = vm.evalCode(job.source, 'script.js', { compileOnly: true });
    if (compiled.error) {
      const name = fail(compiled.error);
      out.compileError = name === 'SyntaxError' && out.limits.length === 0;
      return;
    }
    compiled.value.dispose();
  }
  const evaluated = vm.evalCode(job.source, 'script.js', { type: 'global' });
  if (evaluated.error) {
    fail(evaluated.error);
    return;
  }
  evaluated.value.dispose();
  if (!job.callHook) return;
  const called = vm.callFunction(
    control,
    vm.undefined,
    keep(vm.newString('call')),
    keep(vm.newString(job.input)),
  );
  if (called.error) {
    fail(called.error);
    return;
  }
  const r = called.value;
  const type = vm.typeof(r);
  if (type === 'string') {
    const text = vm.getString(r);
    if (text.length + state.outputUsed > job.outputBytes) {
      out.limits.push('output');
      out.error = 'output limit exceeded';
    } else out.result = text;
  } else if (type !== 'undefined') out.error = 'the result cannot be represented as JSON';
  r.dispose();
}

/** Disposes of the run's context; after a memory or stack limit, of the runtime too. */
function afterRun(box: SandboxBox, p: Prepared, out: SandboxResult): void {
  p.state.run = undefined;
  // The next context is prepared under no deadline (this run's handler may have fired).
  box.rt?.removeInterruptHandler();
  for (const h of p.handles) if (h.alive) h.dispose();
  try {
    p.vm.dispose();
  } catch {
    box.rt = undefined; // an inconsistent runtime is dropped (and its memory with it, below)
  }
  // After a memory or stack limit the runtime may hold garbage the context left: start afresh.
  if (box.rt && out.limits.some((l) => l === 'memory' || l === 'stack')) {
    try {
      box.rt.dispose();
    } catch {
      box.mod = undefined;
    }
    box.rt = undefined;
  }
}

/** One run: a warm context (or a new one), the job's limits, the script, then clean-up. */
function runJob(box: SandboxBox, job: SandboxJob): SandboxResult {
  const t0 = performance.now();
  const out: SandboxResult = {
    id: job.id,
    result: undefined,
    console: [],
    error: '',
    compileError: false,
    limits: [],
    durationMs: 0,
  };
  const p = box.prepared ?? prepareContext(box);
  box.prepared = undefined;
  const clock = armLimits(box.rt as QuickJSRuntime, job, box.cpuMs);
  const state: RunState = { out, outputBytes: job.outputBytes, outputUsed: 0, outputHit: false };
  p.state.run = state;
  try {
    runInContext(p, job, state, clock);
    return out;
  } finally {
    afterRun(box, p, out);
    out.durationMs = performance.now() - t0;
  }
}
