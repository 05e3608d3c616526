import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/*
 * Issue #27 item 5: functions at most ~120 lines, files at most ~400 lines unless the file says
 * why at its top. Functions are found with the TypeScript parser (declarations, expressions,
 * arrows, methods, accessors, constructors), so a nested handler counts on its own and a long
 * string or comment never fools a line-based count. The planted sources below show the finder
 * sees a long function of each form, so the checks can fail.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = join(ROOT, 'src');
const MAX_FUNCTION_LINES = 120;
const MAX_FILE_LINES = 400;
/** A reason for a long file, in its first 5 lines: a comment beginning "Why" or "Over 400 lines". */
const REASON = /^\s*(\/\/|\/\*+|\*)\s*(Why\b|Over 400 lines\b)/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

interface LongFunction {
  name: string;
  line: number;
  lines: number;
}

/** Every function with a body in the source longer than `max` lines (first to last line, inclusive). */
function longFunctions(fileName: string, text: string, max: number): LongFunction[] {
  const kind = fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > max) {
        const name = node.name ? node.name.getText(sf) : ts.SyntaxKind[node.kind];
        found.push({ name, line: first + 1, lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** A function of the given head whose body has `n` statement lines. */
const planted = (head: string, n: number, tail = '}') =>
  `${head}\n${Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n')}\n${tail}\n`;

describe('function length', () => {
  it('finds a long function of every form in a planted source, and not a short one', () => {
    const sources = {
      declaration: planted('export function tooLong() {', 130),
      expression: planted('const f = function named() {', 130, '};'),
      arrow: planted('const g = async (a: number) => {', 130, '};'),
      method: planted('class C {\n  method() {', 130, '  }\n}'),
      nested: planted('function outer() {\n  app.get("/", async (req) => {', 130, '  });\n}'),
      tsx: planted('export function View() {\n  return (\n    <div>', 0, '    </div>\n  );\n}').replace(
        '<div>',
        `<div>\n${'      <p>line</p>\n'.repeat(130)}`,
      ),
    };
    for (const [form, text] of Object.entries(sources)) {
      const file = form === 'tsx' ? 'planted.tsx' : 'planted.ts';
      expect(longFunctions(file, text, MAX_FUNCTION_LINES).length, form).toBeGreaterThan(0);
    }
    expect(longFunctions('short.ts', planted('function short() {', 100), MAX_FUNCTION_LINES)).toEqual([]);
    // Exactly at the bound passes; one line over does not.
    expect(longFunctions('edge.ts', planted('function edge() {', 118), MAX_FUNCTION_LINES)).toEqual([]);
    expect(longFunctions('edge.ts', planted('function edge() {', 119), MAX_FUNCTION_LINES)).toHaveLength(1);
  });

  it(`no function in src/ spans more than ${MAX_FUNCTION_LINES} lines`, () => {
    const files = sourceFiles(SRC);
    expect(files.length).toBeGreaterThan(100);
    const long = files.flatMap((f) =>
      longFunctions(f, readFileSync(f, 'utf8'), MAX_FUNCTION_LINES).map(
        (l) => `${relative(ROOT, f)}:${l.line} ${l.name} (${l.lines} lines)`,
      ),
    );
    expect(long).toEqual([]);
  });
});

/** Whether a file's first 5 lines state why it is long. */
const statesReason = (text: string) =>
  text
    .split('\n')
    .slice(0, 5)
    .some((l) => REASON.test(l));

describe('file length', () => {
  it('recognises the forms a reason takes, and nothing else', () => {
    expect(statesReason('// Why ~560 lines: one cache\nimport x from "y";')).toBe(true);
    expect(statesReason('// Over 400 lines: every setting\n')).toBe(true);
    expect(statesReason('/*\n * Why so long: ...\n */')).toBe(true);
    expect(statesReason('import x from "y";\n// Why: yes')).toBe(true);
    expect(statesReason('import x from "y";\n// Whyever not')).toBe(false);
    expect(statesReason('// A long file\nconst why = 1;')).toBe(false);
    expect(statesReason('\n\n\n\n\n// Why: too late, line 6')).toBe(false);
  });

  it(`no file in src/ has more than ${MAX_FILE_LINES} lines unless its top says why`, () => {
    const unexplained = sourceFiles(SRC)
      .map((f) => ({ f, text: readFileSync(f, 'utf8') }))
      .filter(({ text }) => text.split('\n').length > MAX_FILE_LINES && !statesReason(text))
      .map(({ f, text }) => `${relative(ROOT, f)} (${text.split('\n').length} lines)`);
    expect(unexplained).toEqual([]);
  });
});
