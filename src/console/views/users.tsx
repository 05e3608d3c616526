/** Users: the live list, search, a new user, and the merge suggestions (docs/directory.md). */
import { useState } from 'preact/hooks';
import { call, type Doc, explain, lines, seg } from '../api.js';
import { useLive } from '../live.js';
import { Badge, confirmAction, Heading, Link, Modal, type Note, Notice, useLoad, userName } from '../ui.js';

const SHOWN = 500;

export const matches = (u: Doc, q: string) =>
  q === '' ||
  [u.Email, u.UserName, u.Name?.FullName, u.ID, ...(u.OtherEmails ?? [])].some(
    (v) => typeof v === 'string' && v.toLowerCase().includes(q.toLowerCase()),
  );

function NewUser({ onClose, onCreated }: { onClose: () => void; onCreated: (id: string) => void }) {
  const [note, setNote] = useState<Note>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const doc = {
      Email: String(f.get('email') ?? '').trim(),
      UserName: String(f.get('username') ?? '').trim(),
      Name: { FullName: String(f.get('fullname') ?? '').trim() },
      Admin: f.get('admin') === 'on',
    };
    try {
      const r = await call('POST', '/users', { json: doc });
      onCreated(r.headers.get('x-id') ?? '');
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <Modal title="New user" onClose={onClose}>
      <form onSubmit={submit}>
        <Notice note={note} />
        <label for="nu-email">E-mail</label>
        <input id="nu-email" name="email" type="email" required autocomplete="off" />
        <label for="nu-name">Full name</label>
        <input id="nu-name" name="fullname" autocomplete="off" />
        <label for="nu-username">User name</label>
        <input id="nu-username" name="username" autocomplete="off" aria-describedby="nu-username-hint" />
        <p class="muted hint" id="nu-username-hint">
          Optional: the Unix user name.
        </p>
        <div class="check">
          <input id="nu-admin" name="admin" type="checkbox" />
          <label for="nu-admin">Administrator</label>
        </div>
        <div class="actions">
          <button type="button" class="secondary" onClick={onClose}>
            Cancel
          </button>
          <button type="submit">Create</button>
        </div>
      </form>
    </Modal>
  );
}

function MergeSuggestions({ users }: { users: Map<string, Doc> }) {
  const [list, error, reload] = useLoad(() => lines<Doc>('/users/merge'), []);
  const [note, setNote] = useState<Note>();
  if (error) return <Notice note={{ kind: 'error', text: explain(error) }} />;
  if ((!list || list.length === 0) && !note) return null;
  const merge = async (into: string, from: string) => {
    const a = userName(users.get(into)) || into;
    const b = userName(users.get(from)) || from;
    const ok = await confirmAction({
      title: 'Merge users',
      body: (
        <p>
          {b} is merged into {a}: addresses, factors, memberships and accounts move to {a}; {b} is left
          disabled and its sessions and API keys are revoked.
        </p>
      ),
      action: `Merge ${b} into ${a}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await call('POST', `/users/${seg(into)}/merge`, { json: { From: from } });
      setNote({ kind: 'ok', text: `${b} was merged into ${a}.` });
      reload();
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <section class="card" aria-labelledby="merge-h">
      <h2 id="merge-h">Merge suggestions</h2>
      <Notice note={note} />
      {list?.length === 0 && <p class="muted">No more suggestions.</p>}
      <ul class="plain">
        {((list ?? []) as unknown as Doc[]).map((s, i) => {
          const [a = '', b = ''] = (s.UserIDs ?? []) as string[];
          const reason = String(s.Reason ?? '');
          return (
            <li key={`${a}.${b}.${i}`}>
              <span>
                {userName(users.get(a)) || a} and {userName(users.get(b)) || b}{' '}
                <span class="muted">({reason})</span>
              </span>
              <button type="button" class="secondary small" onClick={() => merge(a, b)}>
                Merge…
              </button>
            </li>
          );
        })}
      </ul>
    </section>
  );
}

export function UsersView() {
  const users = useLive('User');
  const [q, setQ] = useState(new URLSearchParams(location.search).get('q') ?? '');
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState('');
  const found = users.items
    .filter((u) => matches(u, q.trim()))
    .sort((a, b) => userName(a).localeCompare(userName(b)));
  // A directory of thousands is searched, not scrolled: at most SHOWN rows are drawn.
  const shown = found.slice(0, SHOWN);
  return (
    <>
      <div class="head">
        <Heading>Users</Heading>
        <button type="button" onClick={() => setCreating(true)}>
          New user
        </button>
      </div>
      {created && (
        <div class="alert ok" role="status">
          User created. <Link href={`/console/users/${seg(created)}`}>Open the new user's page</Link>
        </div>
      )}
      <section class="card">
        <div class="search">
          <label for="user-search">Search</label>
          <input
            id="user-search"
            type="search"
            value={q}
            placeholder="Name, e-mail address, user name or ID"
            onInput={(e) => setQ(e.currentTarget.value)}
            aria-controls="user-list"
          />
        </div>
        <p class="muted" role="status">
          {!users.ready
            ? 'Loading…'
            : found.length > SHOWN
              ? `The first ${SHOWN} of ${found.length} matching users (of ${users.items.length}): search to narrow them`
              : `${found.length} of ${users.items.length} users`}
        </p>
        <table id="user-list" class="list">
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">Full name</th>
              <th scope="col">User name</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((u) => (
              <tr key={u.ID}>
                <td>
                  <Link href={`/console/users/${seg(u.ID)}`}>{userName(u)}</Link>
                </td>
                <td>{u.Name?.FullName}</td>
                <td>{u.UserName}</td>
                <td>
                  <span class="badges">
                    {u.Admin && <Badge on>admin</Badge>}
                    {u.Disabled && <Badge>disabled</Badge>}
                    {u.MergedInto && <Badge>merged</Badge>}
                    {!u.Active && !u.Disabled && <Badge>not activated</Badge>}
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <MergeSuggestions users={users.byId} />
      {creating && (
        <NewUser
          onClose={() => setCreating(false)}
          onCreated={(id) => {
            setCreating(false);
            setCreated(id);
          }}
        />
      )}
    </>
  );
}
