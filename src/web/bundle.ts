/**
 * The sign-in pages' browser code as the build wrote it (scripts/build-pages.mjs bundles
 * src/web/assets/ into dist/pages/): manifest.json maps each plain name (app.js) to its file,
 * named by a hash of its content (app-<hash>.js). The pages link /signin/assets/<file>, served
 * with long-lived cache headers: a new build changes the names, never the files behind a name.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

/** src/web/ and dist/web/ are both two levels below the package: the bundle is in dist/pages/. */
const BUNDLE_DIR = new URL('../../dist/pages/', import.meta.url);
/** Hashed names change with their content, so a browser may keep them for good. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
const ASSET_TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

/** The files the pages ask for by their plain names. */
export type PageAsset = 'app.js' | 'vouch.js' | 'vouch.css' | 'style.css' | 'mobile-sw.js';

/** The manifest, or undefined when the pages are not built (then no asset is served). */
function readManifest(): Readonly<Record<string, string>> | undefined {
  try {
    const m = JSON.parse(readFileSync(new URL('manifest.json', BUNDLE_DIR), 'utf8')) as Record<
      string,
      unknown
    >;
    const files = Object.entries(m).filter((e): e is [string, string] => typeof e[1] === 'string');
    return Object.freeze(Object.fromEntries(files));
  } catch {
    return undefined;
  }
}

/** Read once: a running service serves the build it started with (its files stay until the next build). */
const MANIFEST = readManifest();

/** The URL of a page asset; without a build, its plain name (which answers 404: see the log). */
export const assetUrl = (name: PageAsset) => `/signin/assets/${MANIFEST?.[name] ?? name}`;

/** An asset's content, for the one served under a fixed name (the service worker: its URL is its scope). */
export function assetText(name: PageAsset): string | undefined {
  const file = MANIFEST?.[name];
  return file ? readFileSync(new URL(file, BUNDLE_DIR), 'utf8') : undefined;
}

export function registerPageAssets(app: FastifyInstance, log: { warn(msg: string): void }) {
  if (!MANIFEST) log.warn('the sign-in pages are not built (no dist/pages/manifest.json): run npm run build');
  serveBuiltFiles(app, '/signin/assets/', BUNDLE_DIR, new Set(Object.values(MANIFEST ?? {})));
}

/**
 * Serves the files a build wrote into `dir` at `prefix`<file>: only the names in `files` (the
 * build's manifest), with long-lived cache headers; any other name answers 404.
 */
export function serveBuiltFiles(app: FastifyInstance, prefix: string, dir: URL, files: ReadonlySet<string>) {
  app.get(`${prefix}:file`, { config: { auth: 'none' } }, async (req, reply) => {
    const file = (req.params as { file: string }).file;
    const type = ASSET_TYPES[file.split('.').pop() ?? ''];
    if (!files.has(file) || !type) return reply.code(404).type('text/plain').send('not found');
    reply.header('Cache-Control', IMMUTABLE);
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Cross-Origin-Resource-Policy', 'same-origin');
    return reply.type(type).send(readFileSync(new URL(file, dir)));
  });
}
