/**
 * The fields of an object as a form: how each kind of field is shown and read back (lists one a
 * line, users and groups by name, zero times as empty), grouped under their legends.
 */
import type { Doc } from './api.js';
import type { FieldSpec } from './fields.js';
import { userName } from './ui.js';

export type Draft = Record<string, string | boolean>;

export function getPath(doc: Doc, path: string): unknown {
  // biome-ignore lint/suspicious/noExplicitAny: walking JSON
  return path.split('.').reduce<any>((o, k) => (o == null ? undefined : o[k]), doc);
}

export function setPath(doc: Doc, path: string, value: unknown) {
  const keys = path.split('.');
  let o = doc;
  for (const k of keys.slice(0, -1)) {
    if (typeof o[k] !== 'object' || o[k] === null) o[k] = {};
    o = o[k];
  }
  o[keys[keys.length - 1] as string] = value;
}

export interface Names {
  users: Map<string, Doc>;
  groups: Map<string, Doc>;
}

export function toForm(f: FieldSpec, v: unknown, names: Names): string | boolean {
  switch (f.kind) {
    case 'bool':
      return v === true;
    case 'lines':
      return Array.isArray(v) ? v.join('\n') : '';
    case 'users':
      return Array.isArray(v) ? v.map((id) => userName(names.users.get(id)) || id).join('\n') : '';
    case 'groups':
      return Array.isArray(v) ? v.map((id) => String(names.groups.get(id)?.Name ?? id)).join('\n') : '';
    case 'time':
      return typeof v === 'string' && !v.startsWith('0001-') ? v : '';
    case 'secret':
      return '';
    default:
      return v == null ? '' : String(v);
  }
}

function lookup(kind: 'user' | 'group', text: string, list: Map<string, Doc>): string {
  if (list.has(text)) return text;
  const low = text.toLowerCase();
  for (const d of list.values()) {
    const keys = kind === 'user' ? [d.Email, d.UserName] : [d.Name];
    if (keys.some((k) => typeof k === 'string' && k.toLowerCase() === low)) return String(d.ID);
  }
  throw new Error(`no ${kind} named ${text}`);
}

export function fromForm(f: FieldSpec, v: string | boolean, names: Names): unknown {
  const s = String(v);
  const split = () =>
    s
      .split('\n')
      .map((x) => x.trim())
      .filter(Boolean);
  switch (f.kind) {
    case 'bool':
      return v === true;
    case 'int':
      return s.trim() === '' ? 0 : Number(s);
    case 'lines':
      return split();
    case 'users':
      return split().map((x) => lookup('user', x, names.users));
    case 'groups':
      return split().map((x) => lookup('group', x, names.groups));
    case 'time':
      return s.trim() === '' ? '0001-01-01T00:00:00Z' : s.trim();
    default:
      return s;
  }
}

export const draftOf = (fields: FieldSpec[], doc: Doc, names: Names): Draft =>
  Object.fromEntries(fields.map((f) => [f.name, toForm(f, getPath(doc, f.name), names)]));

function FieldInput({
  f,
  value,
  set,
  idBase,
}: {
  f: FieldSpec;
  value: string | boolean;
  set: (v: string | boolean) => void;
  idBase: string;
}) {
  const id = `${idBase}-${f.name.replace(/\./g, '-')}`;
  const hint = f.hint ? (
    <p class="muted hint" id={`${id}-hint`}>
      {f.hint}
    </p>
  ) : null;
  const described = f.hint ? `${id}-hint` : undefined;
  if (f.kind === 'bool')
    return (
      <div class="check">
        <input
          id={id}
          type="checkbox"
          checked={value === true}
          onChange={(e) => set(e.currentTarget.checked)}
          aria-describedby={described}
        />
        <label for={id}>{f.label}</label>
        {hint}
      </div>
    );
  const common = { id, 'aria-describedby': described };
  let input = (
    <input
      {...common}
      type={
        (f.kind === 'email'
          ? 'email'
          : f.kind === 'int'
            ? 'number'
            : f.kind === 'secret'
              ? 'password'
              : 'text') as 'text'
      }
      autocomplete="off"
      value={String(value)}
      onInput={(e) => set(e.currentTarget.value)}
    />
  );
  if (f.kind === 'enum')
    input = (
      <select {...common} value={String(value)} onChange={(e) => set(e.currentTarget.value)}>
        {(f.options ?? []).map((o) => (
          <option value={o} key={o}>
            {o === '' ? '(none)' : o}
          </option>
        ))}
      </select>
    );
  if (['long', 'code', 'lines', 'users', 'groups'].includes(f.kind))
    input = (
      <textarea
        {...common}
        rows={f.kind === 'code' ? 12 : 3}
        spellcheck={f.kind !== 'code'}
        class={f.kind === 'code' ? 'code' : 'prose'}
        value={String(value)}
        onInput={(e) => set(e.currentTarget.value)}
      />
    );
  return (
    <div class="field">
      <label for={id}>{f.label}</label>
      {input}
      {hint}
    </div>
  );
}

/** Consecutive fields of one section, in order; fields without one come as one untitled group. */
function sections(fields: FieldSpec[]): [string, FieldSpec[]][] {
  const out: [string, FieldSpec[]][] = [];
  for (const f of fields) {
    const last = out[out.length - 1];
    if (last && last[0] === (f.section ?? '')) last[1].push(f);
    else out.push([f.section ?? '', [f]]);
  }
  return out;
}

interface SectionsProps {
  fields: FieldSpec[];
  draft: Draft;
  idBase: string;
  set: (name: string, v: string | boolean) => void;
}

/** The fields of a form, each section under its legend. */
export function FieldSections({ fields, draft, idBase, set }: SectionsProps) {
  return (
    <>
      {sections(fields).map(([title, group]) => {
        const inputs = (
          <div class="fields">
            {group.map((f) => (
              <FieldInput
                key={f.name}
                f={f}
                idBase={idBase}
                value={draft[f.name] ?? ''}
                set={(v) => set(f.name, v)}
              />
            ))}
          </div>
        );
        return title ? (
          <fieldset class="section" key={title}>
            <legend>{title}</legend>
            {inputs}
          </fieldset>
        ) : (
          <div key="fields">{inputs}</div>
        );
      })}
    </>
  );
}
