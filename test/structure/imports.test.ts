import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The import rules of docs/architecture.md, as `npm test` checks them (npm run lint:imports runs
 * dependency-cruiser with .dependency-cruiser.cjs). Here the same command runs on a made-up tree
 * with one wrong-way import per rule, and must name each rule; and on allowed imports, which pass.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEPCRUISE = join(ROOT, 'node_modules/.bin/depcruise');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');

/** Every folder of src/, read from the tree: a new folder is in the made-up tree as soon as it exists. */
const FOLDERS = readdirSync(join(ROOT, 'src'), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);

/** One wrong-way import per rule: from folder, to folder, the rule that must fire. */
const WRONG: [string, string, string][] = [
  ['core', 'config', 'core-imports-nothing'],
  ['core', 'wire', 'core-imports-nothing'],
  ['wire', 'core', 'wire-imports-nothing'],
  ['config', 'schema', 'config-imports-core-only'],
  ['schema', 'store', 'schema-below-store'],
  ['store', 'objects', 'store-is-generic'],
  ['store', 'auth', 'store-is-generic'],
  ['objects', 'auth', 'objects-below-features'],
  ['objects', 'scripts', 'objects-below-features'],
  ['policy', 'scripts', 'policy-below-features'],
  ['policy', 'auth', 'policy-below-features'],
  ['policy', 'writes', 'policy-below-features'],
  ['scripts', 'auth', 'scripts-below-auth'],
  ['scripts', 'groups', 'scripts-below-auth'],
  ['scripts', 'api', 'scripts-below-auth'],
  ['auth', 'groups', 'auth-is-the-lowest-feature'],
  ['auth', 'api', 'auth-is-the-lowest-feature'],
  ['groups', 'events', 'groups-above-auth-only'],
  ['groups', 'writes', 'groups-above-auth-only'],
  ['writes', 'api', 'features-below-http'],
  ['events', 'api', 'features-below-http'],
  ['backchannel', 'web', 'features-below-http'],
  ['metrics', 'service', 'features-below-http'],
  ['web', 'api', 'web-below-api'],
  ['api', 'service', 'api-below-service'],
  ['service', 'cli', 'service-below-cli'],
  ['proxy', 'objects', 'proxy-is-its-own-program'],
  ['proxy', 'store', 'proxy-is-its-own-program'],
  ['api', 'proxy', 'only-the-cli-starts-the-proxy'],
  ['console', 'core', 'console-is-browser-code'],
  ['web', 'console', 'only-the-build-bundles-the-console'],
  // A new folder is in no layer until the rules name it.
  ['newfeature', 'core', 'every-folder-has-a-layer'],
];

/** Allowed imports: each must pass. */
const RIGHT: [string, string][] = [
  ['config', 'core'],
  ['schema', 'config'],
  ['store', 'schema'],
  ['objects', 'store'],
  ['objects', 'wire'],
  ['auth', 'objects'],
  ['policy', 'objects'],
  ['scripts', 'policy'],
  ['auth', 'policy'],
  ['writes', 'groups'],
  ['directory', 'writes'],
  ['scripts', 'objects'],
  ['auth', 'scripts'],
  ['groups', 'scripts'],
  ['groups', 'auth'],
  ['events', 'groups'],
  ['backchannel', 'groups'],
  ['web', 'events'],
  ['api', 'web'],
  ['service', 'api'],
  ['cli', 'service'],
  ['cli', 'proxy'],
  ['proxy', 'wire'],
  ['proxy', 'config'],
];

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

function cruise(files: Record<string, string>): {
  status: number | null;
  violations: Violation[];
  text: string;
} {
  const dir = mkdtempSync(join(tmpdir(), 'gh-imports-'));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
  );
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const json = spawnSync(DEPCRUISE, ['src', '--config', CONFIG, '--output-type', 'json'], {
    cwd: dir,
    encoding: 'utf8',
  });
  const text = spawnSync(DEPCRUISE, ['src', '--config', CONFIG], { cwd: dir, encoding: 'utf8' });
  const violations = (JSON.parse(json.stdout) as { summary: { violations: Violation[] } }).summary.violations;
  return { status: text.status, violations, text: text.stdout + text.stderr };
}

const modules = () => Object.fromEntries(FOLDERS.map((f) => [`src/${f}/m.ts`, `export const ${f} = 1;\n`]));

describe('import rules (npm run lint:imports)', () => {
  it('each wrong-way import fails, and the message names its rule', () => {
    const files = modules();
    for (const [from, to] of WRONG)
      files[`src/${from}/to-${to}.ts`] = `export { ${to} } from '../${to}/m.js';\n`;
    const { status, violations, text } = cruise(files);
    expect(status).not.toBe(0);
    for (const [from, to, rule] of WRONG) {
      const v = violations.filter((x) => x.from === `src/${from}/to-${to}.ts`).map((x) => x.rule.name);
      expect(v, `${from} -> ${to}`).toContain(rule);
      expect(text).toContain(rule);
    }
    // Nothing but the planted imports is flagged.
    expect(violations.every((x) => /\/to-[a-z]+\.ts$/.test(x.from))).toBe(true);
  }, 60_000);

  it('type-only imports count, and cycles fail', () => {
    const files = modules();
    files['src/store/types.ts'] =
      `import type { objects } from '../objects/m.js';\nexport type T = typeof objects;\n`;
    files['src/auth/a.ts'] = `import { b } from './b.js';\nexport const a = b;\n`;
    files['src/auth/b.ts'] = `import type { a } from './a.js';\nexport const b = 1 as unknown as typeof a;\n`;
    const { violations } = cruise(files);
    expect(violations.map((x) => `${x.from} ${x.rule.name}`).sort()).toEqual(
      expect.arrayContaining(['src/store/types.ts store-is-generic', 'src/auth/a.ts no-circular']),
    );
  }, 60_000);

  it("the pages' browser code (src/web/assets) imports only its own folder, and nothing imports it", () => {
    const files = modules();
    files['src/web/assets/m.ts'] = 'export const assets = 1;\n';
    files['src/web/assets/own.ts'] = `export { assets } from './m.js';\n`;
    files['src/web/assets/to-core.ts'] = `export { core } from '../../core/m.js';\n`;
    files['src/web/to-assets.ts'] = `export { assets } from './assets/m.js';\n`;
    const { violations } = cruise(files);
    expect(violations.map((x) => `${x.from} ${x.rule.name}`).sort()).toEqual([
      'src/web/assets/to-core.ts page-assets-are-browser-code',
      'src/web/to-assets.ts only-the-build-bundles-the-page-assets',
    ]);
  }, 60_000);

  it('imports in the allowed directions pass', () => {
    const files = modules();
    for (const [from, to] of RIGHT)
      files[`src/${from}/to-${to}.ts`] = `export { ${to} } from '../${to}/m.js';\n`;
    const { status, violations } = cruise(files);
    expect(violations).toEqual([]);
    expect(status).toBe(0);
  }, 60_000);
});
