/**
 * One user: the profile (edited with If-Match), disable, delete and merge, their sign-in factors
 * (an administrator's reset), sessions, API keys and group memberships, each revocable.
 */
import { useState } from 'preact/hooks';
import { call, type Doc, explain, filterEq, lines, seg } from '../api.js';
import { ObjectEditor } from '../editor.js';
import { USER_FIELDS } from '../fields.js';
import { useLive } from '../live.js';
import {
  Badge,
  confirmAction,
  Heading,
  Link,
  type Note,
  Notice,
  navigate,
  useLoad,
  userName,
  when,
} from '../ui.js';

/** Deletes an object with the If-Match of its current version (fetched just before). */
export async function deleteObject(path: string) {
  const cur = await call('GET', path);
  await call('DELETE', path, { ifMatch: cur.headers.get('etag') ?? '' });
}

function Factors({ user }: { user: Doc }) {
  const id = String(user.ID);
  const [keys, , reloadKeys] = useLoad(
    () => call<Doc>('GET', `/auth/enroll/u2f?user=${seg(id)}`, { accept: [403, 404] }),
    [id],
  );
  const [note, setNote] = useState<Note>();
  const who = userName(user);
  const remove = async (what: string, path: string) => {
    const ok = await confirmAction({
      title: `Remove ${what}`,
      body: (
        <p>
          {who} can no longer sign in with {what}. Their sessions end.
        </p>
      ),
      action: `Remove ${what} of ${who}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await call('DELETE', path);
      setNote({ kind: 'ok', text: `Removed ${what}.` });
      reloadKeys();
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const creds: Doc[] = keys?.status === 200 ? (keys.data.Credentials ?? []) : [];
  const row = (label: string, have: boolean, factor: string) => (
    <li key={factor}>
      <span>
        {label} <Badge on={have}>{have ? 'set up' : 'not set up'}</Badge>
      </span>
      {have && (
        <button
          type="button"
          class="secondary small"
          onClick={() => remove(label.toLowerCase(), `/auth/enroll/${factor}?user=${seg(id)}`)}
        >
          Remove {label.toLowerCase()}
        </button>
      )}
    </li>
  );
  return (
    <section class="card" aria-labelledby="factors-h">
      <h2 id="factors-h">Sign-in factors</h2>
      <Notice note={note} />
      <ul class="plain">
        {row('Password', user.HavePassword === true, 'password')}
        {row('PIN', user.HavePIN === true, 'pin')}
        {row('Authenticator app', user.HaveTOTPSecret === true, 'totp')}
        {creds.map((c) => (
          <li key={c.ID}>
            <span>
              Security key {c.Name ? `“${c.Name}”` : ''} <span class="muted">added {when(c.CreateTime)}</span>
            </span>
            <button
              type="button"
              class="secondary small"
              onClick={() =>
                remove(
                  `the security key ${c.Name || ''}`.trim(),
                  `/auth/enroll/u2f/${seg(c.ID)}?user=${seg(id)}`,
                )
              }
            >
              Remove key
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Sessions({ id, who }: { id: string; who: string }) {
  const [list, error, reload] = useLoad(() => lines<Doc>(`/auth/sessions?user=${seg(id)}`), [id]);
  const [note, setNote] = useState<Note>();
  const revoke = async (s: Doc) => {
    const ok = await confirmAction({
      title: 'Revoke session',
      body: (
        <p>
          The session of {who} from {String(s.UserAgent || 'an unknown browser')} (
          {String(s.Address || 'unknown address')}) ends now.
        </p>
      ),
      action: `Revoke this session of ${who}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await call('DELETE', `/auth/sessions/${seg(String(s.ID))}`);
      setNote({ kind: 'ok', text: 'Session revoked.' });
      reload();
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <section class="card" aria-labelledby="sessions-h">
      <h2 id="sessions-h">Sessions</h2>
      <Notice note={note ?? (error ? { kind: 'error', text: explain(error) } : undefined)} />
      {list && list.length === 0 && <p class="muted">No live session.</p>}
      <ul class="plain">
        {(list ?? []).map(({ Item: s }) => (
          <li key={s.ID}>
            <span>
              {String(s.UserAgent || 'Unknown browser')}{' '}
              <span class="muted">
                · {String(s.Address)} · level {s.IntegrityLevel} · last seen {when(s.LastSeen)}
              </span>
              {s.Current && <Badge on>this session</Badge>}
            </span>
            <button type="button" class="secondary small" onClick={() => revoke(s)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Keys({ id, who }: { id: string; who: string }) {
  const keys = useLive('APIKey').items.filter((k) => k.UserID === id);
  const [note, setNote] = useState<Note>();
  const revoke = async (k: Doc) => {
    const ok = await confirmAction({
      title: 'Revoke API key',
      body: (
        <p>
          The key “{String(k.Name || k.Prefix)}” of {who} (scopes {(k.Scopes ?? []).join(', ') || 'user'})
          stops working now.
        </p>
      ),
      action: `Revoke the key ${String(k.Name || k.Prefix)}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await deleteObject(`/apikeys/${seg(k.ID)}`);
      setNote({ kind: 'ok', text: 'Key revoked.' });
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <section class="card" aria-labelledby="keys-h">
      <h2 id="keys-h">API keys</h2>
      <Notice note={note} />
      {keys.length === 0 && <p class="muted">No API key.</p>}
      <ul class="plain">
        {keys.map((k) => (
          <li key={k.ID}>
            <span>
              {String(k.Name || '(unnamed)')} <code>{k.Prefix}…</code>{' '}
              <span class="muted">{(k.Scopes ?? []).join(', ')}</span>
            </span>
            <button type="button" class="secondary small" onClick={() => revoke(k)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Memberships({ id }: { id: string }) {
  const mine = useLive('Membership').items.filter((m) => m.UserID === id);
  const groups = useLive('Group').byId;
  return (
    <section class="card" aria-labelledby="member-h">
      <h2 id="member-h">Memberships</h2>
      {mine.length === 0 && <p class="muted">Member of no group.</p>}
      <ul class="plain">
        {mine.map((m) => (
          <li key={m.ID}>
            <Link href={`/console/groups/${seg(m.GroupID)}`}>
              {String(groups.get(m.GroupID)?.Name ?? m.GroupID)}
            </Link>
            <Badge on={m.State === 'active'}>{m.State}</Badge>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Actions({ user, me }: { user: Doc; me: string }) {
  const users = useLive('User');
  const [note, setNote] = useState<Note>();
  const [from, setFrom] = useState('');
  const id = String(user.ID);
  const who = userName(user);
  const act = async (fn: () => Promise<unknown>, done: string) => {
    try {
      await fn();
      setNote({ kind: 'ok', text: done });
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const disable = async () => {
    const ok = await confirmAction({
      title: 'Disable user',
      body: (
        <p>
          {who} can no longer sign in; their sessions and API keys are revoked and their accounts on other
          systems are disabled.
        </p>
      ),
      action: `Disable ${who}`,
      danger: true,
    });
    if (ok) await act(() => call('POST', `/users/${seg(id)}/disable`, { json: {} }), `${who} is disabled.`);
  };
  const remove = async () => {
    const ok = await confirmAction({
      title: 'Delete user',
      body: (
        <p>{who} is deleted with their factors, sessions, API keys and memberships. This cannot be undone.</p>
      ),
      action: `Delete ${who}`,
      danger: true,
    });
    if (!ok) return;
    await act(() => deleteObject(`/users/${seg(id)}`), 'Deleted.');
    navigate('/console/users');
  };
  const merge = async (e: Event) => {
    e.preventDefault();
    const other = users.items.find((u) => u.ID === from || u.Email === from || u.UserName === from);
    if (!other) return setNote({ kind: 'error', text: `No user ${from}.` });
    const b = userName(other);
    const ok = await confirmAction({
      title: 'Merge users',
      body: (
        <p>
          {b} is merged into {who}: addresses, factors, memberships and accounts move here; {b} is left
          disabled.
        </p>
      ),
      action: `Merge ${b} into ${who}`,
      danger: true,
    });
    if (ok)
      await act(
        () => call('POST', `/users/${seg(id)}/merge`, { json: { From: other.ID } }),
        `${b} was merged into ${who}.`,
      );
  };
  return (
    <section class="card" aria-labelledby="actions-h">
      <h2 id="actions-h">Actions</h2>
      <Notice note={note} />
      <div class="actions left">
        {!user.Disabled && id !== me && (
          <button type="button" class="danger" onClick={disable}>
            Disable user…
          </button>
        )}
        {id !== me && (
          <button type="button" class="danger" onClick={remove}>
            Delete user…
          </button>
        )}
      </div>
      <form class="row" onSubmit={merge}>
        <div>
          <label for="merge-from">Merge another user into this one</label>
          <input
            id="merge-from"
            list="merge-users"
            value={from}
            onInput={(e) => setFrom(e.currentTarget.value)}
            required
            placeholder="Their address, user name or ID"
          />
          <datalist id="merge-users">
            {users.items
              .filter((u) => u.ID !== id)
              .map((u) => (
                <option key={u.ID} value={String(u.Email || u.ID)} />
              ))}
          </datalist>
        </div>
        <button type="submit" class="secondary narrow-btn">
          Merge…
        </button>
      </form>
    </section>
  );
}

export function UserView({ id, me }: { id: string; me: string }) {
  const users = useLive('User');
  const [user] = useLoad(() => call<Doc>('GET', `/users/${seg(id)}`).then((r) => r.data), [id]);
  const cur = users.byId.get(id) ?? user;
  if (!cur) return <p class="muted">Loading…</p>;
  const who = userName(cur);
  return (
    <>
      <p class="crumbs">
        <Link href="/console/users">All users</Link>
      </p>
      <div class="head">
        <Heading>{who}</Heading>
        <span class="badges">
          {cur.Admin && <Badge on>admin</Badge>}
          {cur.Disabled && <Badge>disabled</Badge>}
        </span>
      </div>
      <p class="muted">
        ID <code>{id}</code>
        {cur.MergedInto && (
          <>
            {' '}
            · merged into <Link href={`/console/users/${seg(cur.MergedInto)}`}>{cur.MergedInto}</Link>
          </>
        )}
      </p>
      <section class="card" aria-labelledby="profile-h">
        <h2 id="profile-h">Profile</h2>
        <ObjectEditor path={`/users/${seg(id)}`} fields={USER_FIELDS} current={users.byId.get(id)} />
      </section>
      <Actions user={cur} me={me} />
      <Factors user={cur} />
      <Sessions id={id} who={who} />
      <Keys id={id} who={who} />
      <Memberships id={id} />
    </>
  );
}

export { filterEq };
