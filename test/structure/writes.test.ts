import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * One write path (docs/architecture.md, "Writes"): HTTP routes (src/api) and pages (src/web)
 * parse requests and shape answers; every object write goes through src/writes/path.ts or a
 * feature below HTTP. A store write called from either folder fails here, naming the line.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The store's writing methods (src/store/objects.ts) and the write path's. */
const WRITE =
  /\b(?:store|ctx\.store|this\.store)\s*\.\s*(create|update|delete|systemPut|systemInsertMany)\s*\(/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('object writes', () => {
  it('are never called from src/api or src/web', () => {
    const found: string[] = [];
    for (const folder of ['src/api', 'src/web'])
      for (const file of files(join(ROOT, folder)))
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (WRITE.test(line)) found.push(`${file.slice(ROOT.length)}:${i + 1}: ${line.trim()}`);
          });
    expect(found).toEqual([]);
  });

  it('the check would see one (a planted line matches)', () => {
    expect(WRITE.test('    await ctx.store.systemPut(App, id, (doc) => doc);')).toBe(true);
    expect(WRITE.test('const { obj } = await store.create(AccountChangePlan, {});')).toBe(true);
    expect(WRITE.test('await writes.write({ actor, type, op: "create" });')).toBe(false);
  });
});
