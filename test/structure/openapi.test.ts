import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The OpenAPI document is generated (src/api/openapi.ts) from the schemas the routes declare,
 * built from the helpers of src/core/routeschema.ts. No other file writes OpenAPI by hand: no
 * path items, operations with `parameters`/`requestBody`/`responses`, nor its own error-answer
 * helper. A file that does fails here, named.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const GENERATOR = 'src/api/openapi.ts';
const HELPERS = 'src/core/routeschema.ts';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : /\.(ts|tsx|js|mjs)$/.test(p) ? [p] : [];
  });
}
const sources = () =>
  files(join(ROOT, 'src')).map((f) => ({ file: relative(ROOT, f), text: readFileSync(f, 'utf8') }));

/** The shapes of hand-written OpenAPI: path items and operations, in key position. */
const OPENAPI_BY_HAND =
  /^\s*(paths|requestBody|responses)\s*:|\bin:\s*'(path|query|header)'|['"]\/[\w/{}-]*\{\w+\}[\w/{}-]*['"]\s*:/m;

describe('OpenAPI by hand', () => {
  it('no file but the generator is named after OpenAPI', () => {
    const named = sources()
      .map((s) => s.file)
      .filter((f) => /openapi/i.test(f.split('/').pop() ?? ''));
    expect(named).toEqual([GENERATOR]);
  });

  it('no file but the generator writes path items or operations', () => {
    const found = sources()
      .filter((s) => s.file !== GENERATOR && OPENAPI_BY_HAND.test(s.text))
      .map((s) => `${s.file}: ${OPENAPI_BY_HAND.exec(s.text)?.[0].trim()}`);
    expect(found).toEqual([]);
  });

  it('the error answer and the component reference are defined once, in the helpers', () => {
    const found = sources()
      .filter((s) => /#\/components\/schemas\/|schema:\s*ref\('Error'\)/.test(s.text))
      .map((s) => s.file);
    expect(found).toEqual([HELPERS]);
  });

  it('the check finds hand-written OpenAPI (it can fail)', () => {
    expect(OPENAPI_BY_HAND.test("  '/users/{id}': {\n")).toBe(true);
    expect(OPENAPI_BY_HAND.test('      responses: {\n')).toBe(true);
    expect(OPENAPI_BY_HAND.test("  const id = { name: 'id', in: 'path' };")).toBe(true);
    expect(OPENAPI_BY_HAND.test('      response: { 200: ok },')).toBe(false);
  });
});
