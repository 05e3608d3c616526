// Loader hooks for record-modules.mjs (they run on Node's loader thread).
import { appendFileSync } from 'node:fs';

let log;
export function initialize(data) {
  log = data.log;
}

export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(log, `${r.url}\n`);
  return r;
}
