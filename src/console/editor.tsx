/**
 * The one object editor: a form of the type's fields, saved with PUT and the If-Match of the
 * version the administrator was shown. A 412 (someone else changed it meanwhile) fetches the
 * current version and shows, field by field, what changed, before anything is overwritten.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, call, type Doc, explain } from './api.js';
import type { FieldSpec } from './fields.js';
import { useLive } from './live.js';
import { type Note, Notice, userName } from './ui.js';

type Draft = Record<string, string | boolean>;
interface Seen {
  doc: Doc;
  etag: string;
}

export function getPath(doc: Doc, path: string): unknown {
  // biome-ignore lint/suspicious/noExplicitAny: walking JSON
  return path.split('.').reduce<any>((o, k) => (o == null ? undefined : o[k]), doc);
}

function setPath(doc: Doc, path: string, value: unknown) {
  const keys = path.split('.');
  let o = doc;
  for (const k of keys.slice(0, -1)) {
    if (typeof o[k] !== 'object' || o[k] === null) o[k] = {};
    o = o[k];
  }
  o[keys[keys.length - 1] as string] = value;
}

interface Names {
  users: Map<string, Doc>;
  groups: Map<string, Doc>;
}

function toForm(f: FieldSpec, v: unknown, names: Names): string | boolean {
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

function fromForm(f: FieldSpec, v: string | boolean, names: Names): unknown {
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

const draftOf = (fields: FieldSpec[], doc: Doc, names: Names): Draft =>
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

interface EditorProps {
  /** The object's address: /users/<id>, /tenant, ... */
  path: string;
  fields: FieldSpec[];
  /** The object as the event stream holds it now (to say it changed elsewhere). */
  current?: Doc | undefined;
  /** Called with the saved object. */
  onSaved?: (doc: Doc) => void;
  /** Fields of the draft sent along (the script runner reads them). */
  onDraft?: (body: () => Doc) => void;
  /** More buttons beside "Save changes" (the script's test runner). */
  actions?: ComponentChildren;
}

export function ObjectEditor({ path, fields, current, onSaved, onDraft, actions }: EditorProps) {
  const userList = useLive('User');
  const groupList = useLive('Group');
  const names = { users: userList.byId, groups: groupList.byId };
  // Fields that name users or groups are shown by name: the form waits for those lists.
  const namesReady =
    (!fields.some((f) => f.kind === 'users') || userList.ready) &&
    (!fields.some((f) => f.kind === 'groups') || groupList.ready);
  const [seen, setSeen] = useState<Seen>();
  const [draft, setDraft] = useState<Draft>({});
  const [conflict, setConflict] = useState<Seen>();
  const [note, setNote] = useState<Note>();
  const [busy, setBusy] = useState(false);

  const load = async () => {
    const r = await call('GET', path);
    const s = { doc: r.data, etag: r.headers.get('etag') ?? '' };
    setSeen(s);
    setDraft(draftOf(fields, s.doc, names));
    return s;
  };
  useEffect(() => {
    if (namesReady) load().catch((e) => setNote({ kind: 'error', text: explain(e) }));
  }, [path, namesReady]);

  const body = (): Doc => {
    const b: Doc = structuredClone(seen?.doc ?? {});
    for (const f of fields) {
      const v = draft[f.name] ?? '';
      if (f.kind === 'secret' && v === '') continue;
      setPath(b, f.name, fromForm(f, v, names));
    }
    return b;
  };
  onDraft?.(body);

  const save = async (e: Event) => {
    e.preventDefault();
    if (!seen) return;
    setBusy(true);
    try {
      const r = await call('PUT', path, { json: body(), ifMatch: seen.etag, accept: [304, 412] });
      if (r.status === 412) {
        const now = await call('GET', path);
        setConflict({ doc: now.data, etag: now.headers.get('etag') ?? '' });
        setNote({
          kind: 'warn',
          text: 'Not saved: this was changed elsewhere after you opened it. See what changed below.',
        });
        return;
      }
      const s = await load();
      setConflict(undefined);
      setNote({ kind: 'ok', text: r.status === 304 ? 'Nothing to save: no field changed.' : 'Saved.' });
      onSaved?.(s.doc);
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    } finally {
      setBusy(false);
    }
  };

  if (!seen) return <Notice note={note} />;
  const changedElsewhere =
    !conflict &&
    current &&
    fields.some(
      (f) => JSON.stringify(getPath(current, f.name)) !== JSON.stringify(getPath(seen.doc, f.name)),
    );
  const idBase = `ed${path.replace(/\W+/g, '-')}`;
  return (
    <form class="editor" onSubmit={save} aria-label="Edit">
      <Notice note={note} />
      {changedElsewhere && (
        <div class="alert warn" role="status">
          Changed elsewhere since you opened it. Saving checks what you saw first.{' '}
          <button type="button" class="link" onClick={() => load().then(() => setNote(undefined))}>
            Show the current version
          </button>
        </div>
      )}
      {conflict && (
        <ConflictView
          fields={fields}
          mine={seen}
          theirs={conflict}
          draft={draft}
          names={names}
          onTake={(keepMine) => {
            const mineChanged = draftOf(fields, seen.doc, names);
            const next = draftOf(fields, conflict.doc, names);
            if (keepMine)
              for (const f of fields)
                if (draft[f.name] !== mineChanged[f.name]) next[f.name] = draft[f.name] ?? '';
            setSeen(conflict);
            setDraft(next);
            setConflict(undefined);
            setNote({
              kind: 'ok',
              text: keepMine
                ? 'Your edits are applied to the current version: review and save.'
                : 'Showing the current version.',
            });
          }}
        />
      )}
      {sections(fields).map(([title, group]) => {
        const inputs = (
          <div class="fields">
            {group.map((f) => (
              <FieldInput
                key={f.name}
                f={f}
                idBase={idBase}
                value={draft[f.name] ?? ''}
                set={(v) => setDraft({ ...draft, [f.name]: v })}
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
      <div class="actions left">
        <button type="submit" disabled={busy}>
          Save changes
        </button>
        {actions}
      </div>
    </form>
  );
}

interface ConflictProps {
  fields: FieldSpec[];
  mine: Seen;
  theirs: Seen;
  draft: Draft;
  names: Names;
  onTake: (keepMine: boolean) => void;
}

function ConflictView({ fields, mine, theirs, draft, names, onTake }: ConflictProps) {
  const show = (f: FieldSpec, d: Doc) => {
    const v = toForm(f, getPath(d, f.name), names);
    return typeof v === 'boolean' ? (v ? 'yes' : 'no') : v || '(empty)';
  };
  const rows = fields.filter(
    (f) =>
      f.kind !== 'secret' &&
      JSON.stringify(getPath(mine.doc, f.name)) !== JSON.stringify(getPath(theirs.doc, f.name)),
  );
  return (
    <section class="conflict" aria-labelledby="conflict-h">
      <h2 id="conflict-h">Changed meanwhile</h2>
      {rows.length === 0 ? (
        <p class="muted">None of these fields changed (another field did).</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Field</th>
              <th scope="col">When you opened it</th>
              <th scope="col">Now</th>
              <th scope="col">Your edit</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((f) => {
              const d = draft[f.name];
              return (
                <tr key={f.name}>
                  <th scope="row">{f.label}</th>
                  <td>{show(f, mine.doc)}</td>
                  <td>{show(f, theirs.doc)}</td>
                  <td>{typeof d === 'boolean' ? (d ? 'yes' : 'no') : d || '(empty)'}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <div class="actions">
        <button type="button" onClick={() => onTake(true)}>
          Apply my edits to the current version
        </button>
        <button type="button" class="secondary" onClick={() => onTake(false)}>
          Discard my edits
        </button>
      </div>
    </section>
  );
}

export { ApiFailure };
