/**
 * The one object editor: a form of the type's fields, saved with PUT and the If-Match of the
 * version the administrator was shown. A 412 (someone else changed it meanwhile) fetches the
 * current version and shows, field by field, what changed, before anything is overwritten.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, type Doc, explain } from './api.js';
import type { FieldSpec } from './fields.js';
import {
  type Draft,
  draftOf,
  FieldSections,
  fromForm,
  getPath,
  type Names,
  setPath,
  toForm,
} from './form.js';
import { useLive } from './live.js';
import { type Note, Notice } from './ui.js';

interface Seen {
  doc: Doc;
  etag: string;
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
            setSeen(conflict);
            setDraft(rebase(fields, seen, conflict, draft, names, keepMine));
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
      <FieldSections
        fields={fields}
        draft={draft}
        idBase={idBase}
        set={(name, v) => setDraft({ ...draft, [name]: v })}
      />
      <div class="actions left">
        <button type="submit" disabled={busy}>
          Save changes
        </button>
        {actions}
      </div>
    </form>
  );
}

/**
 * The form after a 412: the current version, with the administrator's own edits on top when
 * they keep them (only the fields they changed from what they had been shown).
 */
function rebase(
  fields: FieldSpec[],
  seen: Seen,
  current: Seen,
  draft: Draft,
  names: Names,
  keepMine: boolean,
): Draft {
  const shown = draftOf(fields, seen.doc, names);
  const next = draftOf(fields, current.doc, names);
  if (keepMine)
    for (const f of fields) if (draft[f.name] !== shown[f.name]) next[f.name] = draft[f.name] ?? '';
  return next;
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
