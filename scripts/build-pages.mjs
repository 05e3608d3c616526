// Bundles the sign-in pages' browser code (src/web/assets/, docs/architecture.md "Browser code")
// into dist/pages/ with esbuild: the pages' script (app), the vouching pages' script and style
// (vouch), the shared stylesheet (style) and the approvals app's service worker (mobile-sw), each
// minified and named by a hash of its content, and manifest.json mapping each plain name
// (app.js) to its file (app-<hash>.js) for the service (src/web/bundle.ts). Run by `npm run
// build` and, so that tests always serve the code as it is, by the tests' global setup.
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { writeBundle } from './bundle-output.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'src/web/assets');
const out = join(root, 'dist', 'pages');

const result = await build({
  entryPoints: {
    app: join(src, 'app.ts'),
    vouch: join(src, 'vouch.ts'),
    style: join(src, 'style.css'),
    'mobile-sw': join(src, 'mobile-sw.ts'),
  },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome111', 'firefox115', 'safari16.4'],
  entryNames: '[name]-[hash]',
  outdir: out,
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
  tsconfig: join(src, 'tsconfig.json'),
});
/** app-ABCD1234.js -> app.js: the name the server asks for. */
const HASHED = /^(.+)-[A-Z0-9]{8}(\.[a-z]+)$/;
const manifest = {};
for (const f of result.outputFiles) {
  const file = basename(f.path);
  const m = HASHED.exec(file);
  if (!m) throw new Error(`the pages bundle wrote ${file}, which is not named <name>-<hash>.<ext>`);
  manifest[m[1] + m[2]] = file;
}
for (const want of ['app.js', 'vouch.js', 'vouch.css', 'style.css', 'mobile-sw.js'])
  if (!manifest[want]) throw new Error(`the pages bundle lacks ${want}: ${Object.keys(manifest).join(', ')}`);
writeBundle(out, result.outputFiles, manifest);
