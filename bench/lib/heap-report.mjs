// Preloaded into a benchmarked server with `node --import`: every GATEHOUSE_HEAP_EVERY_MS (default
// 5,000) appends the process's memory figures (process.memoryUsage(), bytes) as a JSON line to the
// file named by GATEHOUSE_HEAP_LOG, so a benchmark can follow the heap as well as the RSS it reads
// from /proc. With --expose-gc it collects garbage first, so heapUsed is what is still live rather
// than a point on GC's sawtooth. That full collection stops the server for tens of milliseconds,
// which the requests in flight wait out: a benchmark that also measures latency reads it seldom.
import { appendFileSync } from 'node:fs';

const file = process.env.GATEHOUSE_HEAP_LOG;
if (file) {
  setInterval(
    () => {
      globalThis.gc?.();
      appendFileSync(file, `${JSON.stringify({ t: Date.now(), ...process.memoryUsage() })}\n`);
    },
    Number(process.env.GATEHOUSE_HEAP_EVERY_MS ?? 5_000),
  ).unref();
}
