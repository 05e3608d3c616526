import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/*
 * Module state (docs/architecture.md, "Module state"): what lives as long as a service belongs to
 * the service object (src/store/service.ts: its `state` and `jobs`), so two services in one
 * process share nothing. What stays at module level is a true process singleton or a per-request
 * side table, and says so: `// module-state: <reason>` on the line right before its declaration.
 *
 * Found by the TypeScript compiler's syntax tree, at the top level of every file of src/:
 * - every `let` and `var`;
 * - every `const` holding an event emitter (`new EventEmitter()`): a bus is state by nature;
 * - every `const` holding a `new Map`/`Set`/`WeakMap`/`WeakSet` or an array literal that the file
 *   mutates (`.set`, `.add`, `.delete`, `.clear`, `.push`, `.pop`, `.shift`, `.unshift`,
 *   `.splice`, or an element assignment);
 * - every `const` holding an object literal that the file writes a property of.
 * A constant lookup table, built once and never changed, is not state and needs no comment.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MARK = /^\s*\/\/ module-state: \S/;
const MUTATORS = new Set(['set', 'add', 'delete', 'clear', 'push', 'pop', 'shift', 'unshift', 'splice']);
const COLLECTIONS = new Set(['Map', 'Set', 'WeakMap', 'WeakSet']);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return files(p);
    return /\.tsx?$/.test(p) && !p.endsWith('.d.ts') ? [p] : [];
  });
}

type Holds = 'collection' | 'array' | 'object' | 'emitter' | 'other';

function holds(init: ts.Expression | undefined): Holds {
  if (!init) return 'other';
  let e = init;
  while (ts.isAsExpression(e) || ts.isSatisfiesExpression(e) || ts.isParenthesizedExpression(e))
    e = e.expression;
  if (ts.isNewExpression(e) && ts.isIdentifier(e.expression)) {
    if (COLLECTIONS.has(e.expression.text)) return 'collection';
    if (e.expression.text === 'EventEmitter') return 'emitter';
  }
  if (ts.isArrayLiteralExpression(e)) return 'array';
  if (ts.isObjectLiteralExpression(e)) return 'object';
  return 'other';
}

/** The names the file mutates: `name.set(...)` and the like, `name[i] = `, `name.x = `, `name.x++`. */
function mutatedNames(file: ts.SourceFile): { calls: Set<string>; writes: Set<string> } {
  const calls = new Set<string>();
  const writes = new Set<string>();
  const base = (e: ts.Expression): string | undefined =>
    (ts.isPropertyAccessExpression(e) || ts.isElementAccessExpression(e)) && ts.isIdentifier(e.expression)
      ? e.expression.text
      : undefined;
  const visit = (node: ts.Node) => {
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      ts.isIdentifier(node.expression.expression) &&
      MUTATORS.has(node.expression.name.text)
    )
      calls.add(node.expression.expression.text);
    if (
      ts.isBinaryExpression(node) &&
      node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
      node.operatorToken.kind <= ts.SyntaxKind.LastAssignment
    ) {
      const name = base(node.left);
      if (name) writes.add(name);
    }
    if (
      (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
      (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken)
    ) {
      const name = base(node.operand);
      if (name) writes.add(name);
    }
    if (ts.isDeleteExpression(node)) {
      const name = base(node.expression);
      if (name) writes.add(name);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return { calls, writes };
}

const parse = (name: string, text: string) =>
  ts.createSourceFile(
    name,
    text,
    ts.ScriptTarget.Latest,
    true,
    name.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
  );

/**
 * What files mutate of what they import: `{ ports } from './hooks.js'` then `ports.a ??= x` marks
 * `ports` of hooks.ts as mutated. Keys are `<file, relative to the root>#<exported name>`.
 */
function importedMutations(sources: Map<string, ts.SourceFile>): Set<string> {
  const out = new Set<string>();
  for (const [name, file] of sources) {
    const { calls, writes } = mutatedNames(file);
    for (const statement of file.statements) {
      if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
      const spec = statement.moduleSpecifier.text;
      const bindings = statement.importClause?.namedBindings;
      if (!spec.startsWith('.') || !bindings || !ts.isNamedImports(bindings)) continue;
      const target = join(name, '..', spec).replace(/\.js$/, '');
      for (const el of bindings.elements) {
        const local = el.name.text;
        if (calls.has(local) || writes.has(local))
          for (const ext of ['.ts', '.tsx']) out.add(`${target}${ext}#${(el.propertyName ?? el.name).text}`);
      }
    }
  }
  return out;
}

/**
 * Top-level declarations of a file that hold module state without a `// module-state:` line;
 * `elsewhere` names what other files mutate of it (importedMutations).
 */
function unmarkedState(name: string, text: string, elsewhere: ReadonlySet<string> = new Set()): string[] {
  const file = parse(name, text);
  const lines = text.split('\n');
  const own = mutatedNames(file);
  const calls = new Set([...own.calls]);
  const writes = new Set([...own.writes]);
  for (const key of elsewhere) if (key.startsWith(`${name}#`)) writes.add(key.slice(name.length + 1));
  const found: string[] = [];
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    const isConst = (list.flags & ts.NodeFlags.Const) !== 0;
    const state = list.declarations.filter((d) => {
      if (!isConst) return true;
      if (!ts.isIdentifier(d.name)) return false;
      const id = d.name.text;
      switch (holds(d.initializer)) {
        case 'emitter':
          return true;
        case 'collection':
          return calls.has(id) || writes.has(id);
        case 'array':
          return calls.has(id) || writes.has(id);
        case 'object':
          return writes.has(id);
        default:
          return false;
      }
    });
    if (state.length === 0) continue;
    const line = file.getLineAndCharacterOfPosition(statement.getStart(file)).line;
    if (MARK.test(lines[line - 1] ?? '')) continue;
    for (const d of state) found.push(`${name}:${line + 1}: ${d.name.getText(file)}`);
  }
  return found;
}

describe('module state', () => {
  it('every top-level mutable of src/ is marked `// module-state: <reason>` on the line before', () => {
    const texts = new Map(
      files(join(ROOT, 'src')).map((p) => [p.slice(ROOT.length), readFileSync(p, 'utf8')]),
    );
    const sources = new Map([...texts].map(([name, text]) => [name, parse(name, text)]));
    const elsewhere = importedMutations(sources);
    const found = [...texts].flatMap(([name, text]) => unmarkedState(name, text, elsewhere));
    expect(found).toEqual([]);
  });

  it('the check sees each kind of state and passes constants and marked state', () => {
    const seen = (text: string) => unmarkedState('x.ts', text).map((f) => f.replace(/^x\.ts:\d+: /, ''));
    expect(seen('let a = 1;\nvar b;\nexport let c: string | undefined;')).toEqual(['a', 'b', 'c']);
    expect(seen('const m = new Map<string, number>();\nexport function f() { m.set("a", 1); }')).toEqual([
      'm',
    ]);
    expect(seen('const s = new WeakSet<object>();\nconst g = (o: object) => s.add(o);')).toEqual(['s']);
    expect(seen('const q: number[] = [];\nq.push(1);')).toEqual(['q']);
    expect(seen('const ports: { a?: number } = {};\nexport const wire = () => { ports.a ??= 1; };')).toEqual([
      'ports',
    ]);
    expect(seen('const n = { count: 0 };\nn.count++;')).toEqual(['n']);
    expect(
      seen("import { EventEmitter } from 'node:events';\nexport const bus = new EventEmitter();"),
    ).toEqual(['bus']);
    // Constants: tables built once and only read; state inside functions; marked state.
    expect(seen("const T = new Set(['a']);\nexport const has = (x: string) => T.has(x);")).toEqual([]);
    expect(seen("const O = { a: 1 };\nexport const get = () => O.a;\nconst L = ['x'];")).toEqual([]);
    expect(seen('export function f() { let x = 1; const m = new Map(); m.set(1, 2); return x; }')).toEqual(
      [],
    );
    expect(seen('// module-state: one per process, because.\nlet a = 1;')).toEqual([]);
    expect(
      seen(
        '/** Doc. */\n// module-state: a side table per request.\nconst w = new WeakMap();\nw.set({}, 1);',
      ),
    ).toEqual([]);
    // Mutated by a file that imports it.
    const hooks = 'export const ports: { a?: number } = {};';
    const wiring = parse('src/api/w.ts', "import { ports } from '../b/hooks.js';\nports.a ??= 1;");
    const elsewhere = importedMutations(new Map([['src/api/w.ts', wiring]]));
    expect(unmarkedState('src/b/hooks.ts', hooks, elsewhere)).toEqual(['src/b/hooks.ts:1: ports']);
    expect(unmarkedState('src/b/other.ts', hooks, elsewhere)).toEqual([]);
    // The reason is required, and the mark must be on the line right before.
    expect(seen('// module-state:\nlet a = 1;')).toEqual(['a']);
    expect(seen('// module-state: why\n\nlet a = 1;')).toEqual(['a']);
  });
});
