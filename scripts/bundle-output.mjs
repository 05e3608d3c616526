// Writes an esbuild bundle (its output files and the manifest naming them) into its folder under
// dist/, for scripts/build-console.mjs and scripts/build-pages.mjs.
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * Every file is written under a temporary name and renamed into place, and files of an older
 * build are removed only after the new manifest is in place: a service (or a test) reading the
 * bundle while another build runs sees either the old files or the new ones, never half a file.
 */
const writeAtomically = (path, contents) => {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, path);
};

/** `files` are esbuild's output files (written with `write: false`) in `out`. */
export function writeBundle(out, files, manifest) {
  mkdirSync(out, { recursive: true });
  const names = files.map((f) => basename(f.path));
  for (const f of files) writeAtomically(f.path, f.contents);
  writeAtomically(join(out, 'manifest.json'), `${JSON.stringify(manifest)}\n`);
  for (const f of readdirSync(out)) {
    if (f !== 'manifest.json' && !names.includes(f) && !f.endsWith('.tmp'))
      rmSync(join(out, f), { force: true });
  }
}
