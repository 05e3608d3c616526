/**
 * Apps: the live list and a new App; one App: its settings (proxy, OpenID client, identity
 * provider, access groups, accounts), its proxy token and OpenID client secret (shown once).
 */
import { useState } from 'preact/hooks';
import { call, type Doc, explain, seg } from '../api.js';
import { ObjectEditor } from '../editor.js';
import { APP_FIELDS } from '../fields.js';
import { openCreated, useLive } from '../live.js';
import { Badge, confirmAction, Heading, Link, Modal, type Note, Notice, navigate } from '../ui.js';
import { deleteObject } from './user.js';

export function AppsView() {
  const apps = useLive('App');
  const [creating, setCreating] = useState(false);
  const [note, setNote] = useState<Note>();
  const create = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    try {
      const r = await call('POST', '/apps', {
        json: { Name: String(f.get('name')), URL: String(f.get('url') ?? '') },
      });
      setCreating(false);
      await openCreated('App', 'apps', r);
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <>
      <div class="head">
        <Heading>Apps</Heading>
        <button type="button" onClick={() => setCreating(true)}>
          New App
        </button>
      </div>
      <Notice note={note} />
      <section class="card">
        {apps.ready && apps.items.length === 0 && <p class="muted">No App yet.</p>}
        <ul class="plain">
          {apps.items
            .sort((a, b) => String(a.Name).localeCompare(String(b.Name)))
            .map((a) => (
              <li key={a.ID}>
                <span>
                  <Link href={`/console/apps/${seg(a.ID)}`}>{String(a.Name || a.ID)}</Link>{' '}
                  <span class="muted">{String(a.URL ?? '')}</span>
                </span>
                <span class="badges">
                  {a.OIDC?.Enabled && <Badge on>OpenID client</Badge>}
                  {a.HaveProxyToken && <Badge on>proxy</Badge>}
                  {a.OAuth2?.ClientID && <Badge>identity provider</Badge>}
                </span>
              </li>
            ))}
        </ul>
      </section>
      {creating && (
        <Modal title="New App" onClose={() => setCreating(false)}>
          <form onSubmit={create}>
            <label for="na-name">Name</label>
            <input id="na-name" name="name" required autocomplete="off" />
            <label for="na-url">Address of the application</label>
            <input id="na-url" name="url" type="url" autocomplete="off" />
            <div class="actions">
              <button type="button" class="secondary" onClick={() => setCreating(false)}>
                Cancel
              </button>
              <button type="submit">Create App</button>
            </div>
          </form>
        </Modal>
      )}
    </>
  );
}

/** A secret the service shows once: displayed until the administrator closes it. */
function Secret({ label, value, onClose }: { label: string; value: string; onClose: () => void }) {
  return (
    <Modal title={label} onClose={onClose}>
      <p>Copy it now: it is shown only this once.</p>
      <pre class="out secret">{value}</pre>
      <div class="actions">
        <button type="button" onClick={onClose}>
          Done
        </button>
      </div>
    </Modal>
  );
}

export function AppView({ id }: { id: string }) {
  const apps = useLive('App');
  const [note, setNote] = useState<Note>();
  const [secret, setSecret] = useState<{ label: string; value: string }>();
  const a = apps.byId.get(id);
  if (!a) return <p class="muted">{apps.ready ? 'No such App.' : 'Loading…'}</p>;
  const issue = async (what: 'proxy' | 'oidc') => {
    const replaces = what === 'proxy' ? a.HaveProxyToken : a.HaveOIDCSecret;
    const label = what === 'proxy' ? 'proxy token' : 'OpenID client secret';
    const article = what === 'proxy' ? 'a' : 'an';
    const ok = await confirmAction({
      title: `Issue ${article} ${label}`,
      body: (
        <p>
          {replaces
            ? `The current ${label} of ${a.Name} stops working at once and is replaced.`
            : `${a.Name} gets ${article} ${label}.`}
        </p>
      ),
      action: `Issue ${article} ${label} for ${a.Name}`,
      danger: !!replaces,
    });
    if (!ok) return;
    try {
      const r = await call<Doc>(
        'POST',
        what === 'proxy' ? `/apps/${seg(id)}/proxytoken` : `/apps/${seg(id)}/oidc/secret`,
        { json: {} },
      );
      setSecret({
        label: what === 'proxy' ? 'Proxy token' : 'OpenID client secret',
        value: String(r.data.Token ?? r.data.ClientSecret ?? ''),
      });
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const remove = async () => {
    const ok = await confirmAction({
      title: 'Delete App',
      body: <p>{a.Name} is deleted: its proxies and OpenID clients stop working.</p>,
      action: `Delete ${a.Name}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await deleteObject(`/apps/${seg(id)}`);
      navigate('/console/apps');
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <>
      <p class="crumbs">
        <Link href="/console/apps">All Apps</Link>
      </p>
      <div class="head">
        <Heading>{String(a.Name || id)}</Heading>
        <button type="button" class="danger" onClick={remove}>
          Delete App…
        </button>
      </div>
      <p class="muted">
        ID and OpenID client ID <code>{id}</code>
      </p>
      <Notice note={note} />
      <section class="card" aria-labelledby="cred-h">
        <h2 id="cred-h">Credentials</h2>
        <ul class="plain">
          <li>
            <span>
              Proxy token <Badge on={a.HaveProxyToken}>{a.HaveProxyToken ? 'issued' : 'none'}</Badge>
            </span>
            <button type="button" class="secondary small" onClick={() => issue('proxy')}>
              {a.HaveProxyToken ? 'Replace the proxy token…' : 'Issue a proxy token…'}
            </button>
          </li>
          <li>
            <span>
              OpenID client secret <Badge on={a.HaveOIDCSecret}>{a.HaveOIDCSecret ? 'issued' : 'none'}</Badge>
            </span>
            <button type="button" class="secondary small" onClick={() => issue('oidc')}>
              {a.HaveOIDCSecret ? 'Replace the client secret…' : 'Issue a client secret…'}
            </button>
          </li>
        </ul>
      </section>
      <section class="card" aria-labelledby="app-settings-h">
        <h2 id="app-settings-h">Settings</h2>
        <ObjectEditor path={`/apps/${seg(id)}`} fields={APP_FIELDS} current={a} />
      </section>
      {secret && <Secret label={secret.label} value={secret.value} onClose={() => setSecret(undefined)} />}
    </>
  );
}

export { Secret };
