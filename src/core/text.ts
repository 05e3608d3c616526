/**
 * Text that every store backend holds alike. PostgreSQL's text and jsonb cannot hold U+0000, and
 * jsonb refuses the \u escape of a surrogate without its pair; SQLite stores both, and both
 * drivers silently turn an unpaired surrogate into U+FFFD when they encode a parameter. So the
 * service refuses such text in every string a client sends, before it reaches the store: one
 * answer (400) on both backends instead of a 500 on one of them, and no string that is compared
 * as something other than what was sent. Dependency-free.
 */

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Does the string hold U+0000 or an unpaired surrogate? */
export const unstorable = (s: string): boolean => s.includes('\u0000') || UNPAIRED_SURROGATE.test(s);

/**
 * Could a JSON text hold an unstorable string? Only through a \u escape: JSON forbids a raw
 * U+0000 in its text, and UTF-8 (what bodies are decoded from) cannot carry an unpaired
 * surrogate. One scan; a match (which may be an escaped backslash before "u0000") means a walk.
 */
const ESCAPE_OF_UNSTORABLE = /\\u(?:0000|[dD][89abcdefABCDEF])/;
export const mayHoldUnstorable = (json: string): boolean => ESCAPE_OF_UNSTORABLE.test(json);

/** A key as Field shows it: JSON escapes, so the answer never echoes a NUL or a lone surrogate. */
export const fieldSegment = (key: string): string => JSON.stringify(key).slice(1, -1);

interface Visit {
  value: unknown;
  parent: Visit | undefined;
  /** The key or index of this value in its parent. */
  step: string | number;
}

/** Steps of a path that Field shows; a deeper path ends in "…" (a body can nest 500,000 deep). */
const MAX_STEPS = 32;

function pathOf(v: Visit | undefined, lastKey?: string): string {
  const steps: (string | number)[] = lastKey === undefined ? [] : [lastKey];
  for (let at = v; at?.parent; at = at.parent) steps.push(at.step);
  steps.reverse();
  let out = '';
  for (const s of steps.slice(0, MAX_STEPS)) {
    if (typeof s === 'number') out += `[${s}]`;
    else out += out === '' ? fieldSegment(s) : `.${fieldSegment(s)}`;
  }
  return steps.length > MAX_STEPS ? `${out}…` : out;
}

/**
 * Where a parsed JSON value (or form) holds unstorable text, in a key or a string, as a Field
 * path (Members[2].Name, "" for the value itself); undefined when nowhere. Iterative, since a
 * body of a megabyte can nest half a million levels deep.
 */
export function unstorableAt(root: unknown): string | undefined {
  const stack: Visit[] = [{ value: root, parent: undefined, step: '' }];
  for (let v = stack.pop(); v !== undefined; v = stack.pop()) {
    const { value } = v;
    if (typeof value === 'string') {
      if (unstorable(value)) return pathOf(v);
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], parent: v, step: i });
    } else if (value !== null && typeof value === 'object') {
      const keys = Object.keys(value);
      for (const k of keys) if (unstorable(k)) return pathOf(v, k);
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i] as string;
        stack.push({ value: (value as Record<string, unknown>)[k], parent: v, step: k });
      }
    }
  }
  return undefined;
}
