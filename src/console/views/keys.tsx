/** API keys: every key, a new key (its secret shown once), revoking one. */
import { useState } from 'preact/hooks';
import { call, type Doc, explain, seg } from '../api.js';
import { useLive } from '../live.js';
import { confirmAction, Heading, Link, Modal, type Note, Notice, userName, when } from '../ui.js';
import { Secret } from './apps.js';
import { deleteObject } from './user.js';

const SCOPES = ['user', 'audit', 'sync', 'admin'];

interface NewKeyProps {
  users: Doc[];
  onClose: () => void;
  onCreated: (secret: string) => void;
}

/** "New API key": name, scopes, owner and expiry; the key itself is shown once by the caller. */
function NewKey({ users, onClose, onCreated }: NewKeyProps) {
  const [note, setNote] = useState<Note>();
  const create = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const owner = String(f.get('owner') ?? '').trim();
    const u = owner
      ? users.find((x) => x.ID === owner || x.Email === owner || x.UserName === owner)
      : undefined;
    if (owner && !u) return setNote({ kind: 'error', text: `No user ${owner}.` });
    const expires = String(f.get('expires') ?? '').trim();
    try {
      const r = await call<Doc>('POST', '/apikeys', {
        json: {
          Name: String(f.get('name') ?? ''),
          Scopes: SCOPES.filter((s) => f.get(`scope-${s}`) === 'on'),
          ...(u ? { UserID: u.ID } : {}),
          ...(expires ? { ExpireTime: expires } : {}),
        },
      });
      onCreated(String(r.data.Secret ?? ''));
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <Modal title="New API key" onClose={onClose}>
      <form onSubmit={create}>
        <Notice note={note} />
        <label for="nk-name">Name</label>
        <input id="nk-name" name="name" required autocomplete="off" />
        <fieldset>
          <legend>Scopes</legend>
          {SCOPES.map((s) => (
            <div class="check" key={s}>
              <input id={`nk-${s}`} name={`scope-${s}`} type="checkbox" />
              <label for={`nk-${s}`}>{s}</label>
            </div>
          ))}
        </fieldset>
        <label for="nk-owner">Owner</label>
        <input
          id="nk-owner"
          name="owner"
          list="nk-users"
          autocomplete="off"
          aria-describedby="nk-owner-hint"
        />
        <p class="muted hint" id="nk-owner-hint">
          The user the key acts for (address, user name or ID); empty: you.
        </p>
        <datalist id="nk-users">
          {users.map((u) => (
            <option key={u.ID} value={String(u.Email || u.ID)} />
          ))}
        </datalist>
        <label for="nk-expires">Expires</label>
        <input id="nk-expires" name="expires" placeholder="2031-01-01T00:00:00Z" autocomplete="off" />
        <div class="actions">
          <button type="button" class="secondary" onClick={onClose}>
            Cancel
          </button>
          <button type="submit">Create key</button>
        </div>
      </form>
    </Modal>
  );
}

export function KeysView() {
  const keys = useLive('APIKey');
  const users = useLive('User');
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState('');
  const [note, setNote] = useState<Note>();
  const revoke = async (k: Doc) => {
    const owner = userName(users.byId.get(k.UserID)) || k.UserID || 'no user';
    const ok = await confirmAction({
      title: 'Revoke API key',
      body: (
        <p>
          The key “{String(k.Name || k.Prefix)}” of {owner} (scopes {(k.Scopes ?? []).join(', ') || 'user'})
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
    <>
      <div class="head">
        <Heading>API keys</Heading>
        <button type="button" onClick={() => setCreating(true)}>
          New API key
        </button>
      </div>
      <Notice note={note} />
      <section class="card">
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Starts with</th>
              <th scope="col">Scopes</th>
              <th scope="col">Owner</th>
              <th scope="col">Expires</th>
              <th scope="col">Revoke</th>
            </tr>
          </thead>
          <tbody>
            {keys.items.map((k) => (
              <tr key={k.ID}>
                <td>{String(k.Name || '(unnamed)')}</td>
                <td>
                  <code>{k.Prefix}</code>
                </td>
                <td>{(k.Scopes ?? []).join(', ')}</td>
                <td>
                  {k.UserID ? (
                    <Link href={`/console/users/${seg(k.UserID)}`}>
                      {userName(users.byId.get(k.UserID)) || k.UserID}
                    </Link>
                  ) : (
                    'none'
                  )}
                </td>
                <td>{when(k.ExpireTime) || 'never'}</td>
                <td>
                  <button type="button" class="danger small" onClick={() => revoke(k)}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      {creating && (
        <NewKey
          users={users.items}
          onClose={() => setCreating(false)}
          onCreated={(value) => {
            setCreating(false);
            setSecret(value);
          }}
        />
      )}
      {secret && <Secret label="New API key" value={secret} onClose={() => setSecret('')} />}
    </>
  );
}
