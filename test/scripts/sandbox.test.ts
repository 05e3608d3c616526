import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SCRIPT_TENANT_FIELDS } from '../../src/objects/scriptlimits.js';
import { sandboxPool, WATCHDOG_GRACE_MS, wallTimeFor } from '../../src/scripts/pool.js';
import { limitsOf, runSource } from '../../src/scripts/runner.js';

/*
 * The sandbox alone (src/scripts/worker.ts through the pool): hostile scripts hit their limit and
 * fail, and nothing of the host is reachable. The service-level tests are in scripts.test.ts.
 */

const limits = limitsOf({});
const data = {
  user: { ID: 'u1', Email: 'a@example.com' },
  groups: [{ ID: 'g1', Name: 'ops', State: 'active' }],
  tenant: { Name: 'T' },
};
const run = (source: string, input: unknown = {}, l = limits) => runSource(source, input, data, l);

describe('sandbox', () => {
  it('runs hook(input) and returns its JSON result', async () => {
    const o = await run(
      'function hook(input) { return { sum: input.a + input.b, who: gatehouse.user().Email }; }',
      { a: 2, b: 3 },
    );
    expect(o.ok).toBe(true);
    expect(o.result).toEqual({ sum: 5, who: 'a@example.com' });
  });

  it('gives the documented host API: user, groups, tenant, console lines', async () => {
    const o = await run(`function hook() {
      console.log('hello', {x: 1}); console.warn('careful'); console.error('bad'); gatehouse.log('via gatehouse');
      return [gatehouse.groups()[0].Name, gatehouse.tenant().Name];
    }`);
    expect(o.result).toEqual(['ops', 'T']);
    expect(o.raw.console).toEqual([
      'info: hello {"x":1}',
      'warn: careful',
      'error: bad',
      'info: via gatehouse',
    ]);
  });

  it('returns any JSON value and round-trips it (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (v) => {
        const o = await run('function hook(input) { return input; }', v);
        expect(o.ok).toBe(true);
        // JSON has no -0: the sandbox's JSON.stringify writes 0, as the host's does.
        expect(o.result).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 40 },
    );
  });

  it('stops an infinite loop at the time limit', async () => {
    const t = performance.now();
    const o = await run('function hook() { for (;;) {} }', {}, { ...limits, timeMs: 30 });
    expect(o.ok).toBe(false);
    expect(o.raw.limits).toEqual(['time']);
    expect(performance.now() - t).toBeLessThan(1000);
  });

  it('stops an infinite loop at top level, and one in a catch-all try', async () => {
    for (const src of [
      'while (true) {}',
      'function hook() { for (;;) { try { for (;;) {} } catch (e) {} } }',
    ]) {
      const o = await run(src, {}, { ...limits, timeMs: 30 });
      expect(o.raw.limits).toEqual(['time']);
    }
  });

  it('stops a memory bomb at the memory limit', async () => {
    const o = await run(
      'function hook() { const a = []; for (;;) a.push({ n: a.length, s: "abc" + a.length }); }',
      {},
      { ...limits, memoryBytes: 2 * 1024 * 1024, timeMs: 1000 },
    );
    expect(o.ok).toBe(false);
    expect(o.raw.limits).toEqual(['memory']);
    // The sandbox is usable afterwards.
    expect((await run('function hook() { return 1; }')).result).toBe(1);
  });

  it('terminates a script stuck inside a builtin, where the interrupt handler is not called', async () => {
    // Filling a sparse array under a small memory limit spends seconds in one native call.
    const t = performance.now();
    const o = await run(
      'function hook() { const a = []; for (;;) a.push(new Array(100000).fill("x".repeat(100))); }',
      {},
      { ...limits, memoryBytes: 2 * 1024 * 1024, timeMs: 20 },
    );
    expect(o.ok).toBe(false);
    expect(o.raw.limits.length).toBe(1);
    expect(['time', 'memory']).toContain(o.raw.limits[0]);
    // The watchdog waits out the run's wall-clock bound (a starved worker is not a stuck one), then its grace.
    expect(performance.now() - t).toBeLessThan(wallTimeFor(20) + WATCHDOG_GRACE_MS + 1000);
    expect((await run('function hook() { return 3; }')).result).toBe(3);
  });

  it('fails a string-doubling bomb', async () => {
    const o = await run(
      'function hook() { let s = "x"; for (;;) s = (s + s).split("").join(""); }',
      {},
      { ...limits, timeMs: 1000 },
    );
    expect(o.ok).toBe(false);
    expect(o.raw.limits).toEqual(['memory']);
  });

  it('stops deep recursion at the stack limit, at the largest stack allowed too', async () => {
    for (const stackBytes of [
      SCRIPT_TENANT_FIELDS.ScriptStackLimitBytes.min,
      SCRIPT_TENANT_FIELDS.ScriptStackLimitBytes.max,
    ]) {
      const o = await run(
        'function f(n) { return f(n + 1) + 1; } function hook() { return f(0); }',
        {},
        { ...limits, stackBytes: stackBytes as number, timeMs: 1000 },
      );
      expect(o.ok).toBe(false);
      expect(o.raw.limits).toEqual(['stack']);
    }
    expect((await run('function hook() { return 2; }')).result).toBe(2);
  });

  it('bounds console output and the result', async () => {
    const spam = await run(
      'function hook() { for (;;) console.log("x".repeat(1000)); }',
      {},
      { ...limits, outputBytes: 4096 },
    );
    expect(spam.raw.limits).toEqual(['output']);
    expect(spam.raw.console.join('\n').length).toBeLessThanOrEqual(4096);
    // A script that catches the output error still cannot log past the limit.
    const caught = await run(
      'function hook() { for (let i = 0; i < 100; i++) try { console.log("y".repeat(1000)); } catch (e) {} return 1; }',
      {},
      { ...limits, outputBytes: 4096 },
    );
    expect(caught.raw.console.join('\n').length).toBeLessThanOrEqual(4096);
    const big = await run(
      'function hook() { return "z".repeat(10000); }',
      {},
      { ...limits, outputBytes: 4096 },
    );
    expect(big.ok).toBe(false);
    expect(big.raw.limits).toEqual(['output']);
  });

  it('reaches nothing of the host: process, require, import(), timers, globalThis of Node', async () => {
    const o = await run(`function hook() {
      return {
        process: typeof process, require: typeof require, module: typeof module, Buffer: typeof Buffer,
        setTimeout: typeof setTimeout, setInterval: typeof setInterval, fetch: typeof fetch,
        WebAssembly: typeof WebAssembly, std: typeof std, os: typeof os, queueMicrotask: typeof queueMicrotask,
      };
    }`);
    expect(o.result).toEqual({
      process: 'undefined',
      require: 'undefined',
      module: 'undefined',
      Buffer: 'undefined',
      setTimeout: 'undefined',
      setInterval: 'undefined',
      fetch: 'undefined',
      WebAssembly: 'undefined',
      std: 'undefined',
      os: 'undefined',
      queueMicrotask: 'undefined',
    });
    const imp = await run('function hook() { return import("fs"); }');
    expect(imp.ok).toBe(false);
    const stat = await run('import fs from "fs"; globalThis.hook = () => 1;');
    expect(stat.ok).toBe(false);
    const ctor = await run(
      'function hook() { return (function(){}).constructor("return typeof process")(); }',
    );
    expect(ctor.result).toBe('undefined');
  });

  it('cannot reach the host through the host API functions', async () => {
    const o = await run(`function hook() {
      const f = console.log;
      const out = [];
      try { out.push(typeof f.constructor('return this')().process); } catch (e) { out.push('threw'); }
      try { out.push(Object.getPrototypeOf(f) === Function.prototype); } catch (e) { out.push('threw'); }
      return out;
    }`);
    expect(o.result).toEqual(['undefined', true]);
  });

  it('prototype pollution stays inside one run', async () => {
    const polluted = await run(`function hook() {
      Object.prototype.isAdmin = true; Array.prototype.push = null; JSON.stringify = () => '"forged"';
      return { ok: 1 };
    }`);
    // The script replaced JSON.stringify: the prelude kept its own; the result is the real value.
    expect(polluted.result).toEqual({ ok: 1 });
    const next = await run('function hook() { return [({}).isAdmin === undefined, typeof [].push]; }');
    expect(next.result).toEqual([true, 'function']);
  });

  it('a result with __proto__ is data, not a prototype', async () => {
    const o = await run('function hook() { return JSON.parse(\'{"__proto__": {"admin": true}}\'); }');
    expect(o.ok).toBe(true);
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(Object.getPrototypeOf(o.result)).toBe(Object.prototype);
  });

  it('reports errors: a throw, a missing hook, a promise, a syntax error', async () => {
    expect((await run('function hook() { throw new Error("nope"); }')).raw.error).toBe('Error: nope');
    expect((await run('var x = 1;')).raw.error).toContain('defines no function hook');
    expect((await run('async function hook() { return 1; }')).raw.error).toContain('promise');
    const syntax = await runSource('function hook( {', {}, data, limits, true);
    expect(syntax.raw.compileError).toBe(true);
    const thrown = await runSource('throw new SyntaxError("not a compile error")', {}, data, limits, true);
    expect(thrown.raw.compileError).toBe(false);
  });

  it('limits hit inside the interpreter never cost a worker', async () => {
    const before = sandboxPool().restarts;
    for (const src of [
      'while (true) {}',
      'function f() { return f(); } f()',
      'const a = []; for (;;) a.push({});',
    ]) {
      const o = await run(src, {}, { ...limits, timeMs: 30, memoryBytes: 2 << 20 });
      expect(o.raw.limits.length).toBe(1);
      expect((await run('function hook(i) { return i; }', 7)).result).toBe(7);
    }
    expect(sandboxPool().restarts).toBe(before);
  });

  it('a time-limited run keeps the next runs fast', async () => {
    await run('function hook() { for (;;) {} }', {}, { ...limits, timeMs: 20 });
    const t = performance.now();
    for (let i = 0; i < 20; i++) await run('function hook(i) { return i; }', i);
    expect((performance.now() - t) / 20).toBeLessThan(20);
  });
});
