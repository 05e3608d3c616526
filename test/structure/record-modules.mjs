// Preloaded with `node --import` by modules.test.ts: records every module the process loads into
// the file named by GATEHOUSE_MODULE_LOG, one path or URL a line. ES modules are recorded as they
// resolve (by a resolve hook on the loader thread); CommonJS ones from require.cache at exit, since
// Node 20 runs require() without the ESM hooks.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const log = process.env.GATEHOUSE_MODULE_LOG;
if (log) {
  register('./record-hooks.mjs', import.meta.url, { data: { log } });
  const cache = createRequire(import.meta.url).cache;
  process.on('exit', () => appendFileSync(log, `${Object.keys(cache).join('\n')}\n`));
}
