// Bundles the admin console (src/console/, docs/console.md) into dist/console/ with esbuild:
// one script and one stylesheet, minified, named by a hash of their content (served with
// long-lived cache headers), and manifest.json naming them for the service (src/web/console.ts).
// Prints the sizes, raw and gzipped, so a change that bloats the bundle is seen at build time.
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { writeBundle } from './bundle-output.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'dist', 'console');
/** The budget of docs/decisions.md: the console's script and style, gzipped. */
const BUDGET_GZIP = 150 * 1024;

const result = await build({
  entryPoints: { console: join(root, 'src/console/main.tsx') },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome111', 'firefox115', 'safari16.4'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  entryNames: '[name]-[hash]',
  outdir: out,
  metafile: true,
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
  tsconfig: join(root, 'src/console/tsconfig.json'),
});
const files = result.outputFiles.map((f) => basename(f.path));
const js = files.find((f) => f.endsWith('.js'));
const css = files.find((f) => f.endsWith('.css'));
if (!js || !css) throw new Error(`the console bundle lacks a script or a stylesheet: ${files.join(', ')}`);
let gz = 0;
for (const f of result.outputFiles) {
  const z = gzipSync(f.contents, { level: 9 }).length;
  gz += z;
  process.stdout.write(`console bundle: ${basename(f.path)} ${f.contents.length} bytes, ${z} gzipped\n`);
}
if (gz > BUDGET_GZIP)
  throw new Error(`the console bundle is ${gz} bytes gzipped, over the budget of ${BUDGET_GZIP}`);
writeBundle(out, result.outputFiles, { js, css });
