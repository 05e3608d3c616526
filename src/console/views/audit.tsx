/**
 * The audit trail (GET /audit on the event stream: the newest 1,000 entries, then each new one),
 * filterable by who, what and outcome. An entry names the object it touched ("created user
 * ada@…") from the live lists, and the policy rule of a refusal when the entry carries one.
 */
import { useState } from 'preact/hooks';
import { type Doc, seg } from '../api.js';
import { useLive } from '../live.js';
import { Badge, Heading, Link, userName, when } from '../ui.js';

const VERB: Record<string, string> = { POST: 'created', PUT: 'changed', PATCH: 'changed', DELETE: 'deleted' };
/** Membership operations as a sentence says them ("approved ada@… in staff"). */
const PAST: Record<string, string> = {
  approve: 'approved',
  reject: 'rejected',
  unreject: 'took back the rejection of',
  activate: 'activated',
  use: 'recorded a use by',
};
/** Sign-in steps: what a success and a refusal mean. */
const SIGNIN: Record<string, [string, string]> = {
  'POST /auth/email': ['began to sign in', 'named an unknown or refused address'],
  'POST /auth/password': ['proved a password', 'gave a wrong password'],
  'POST /auth/totp': ['proved an authenticator code', 'gave a wrong authenticator code'],
  'POST /auth/backup': ['proved a backup code', 'gave a wrong backup code'],
  'POST /auth/signout': ['signed out', 'could not sign out'],
  'DELETE /auth/sessions/:id': ['revoked a session', 'was refused revoking a session'],
};

/** Object types as a sentence says them ("created user ada@…"). */
const KIND_WORDS: Record<string, string> = {
  User: 'user',
  Group: 'group',
  Script: 'script',
  APIKey: 'API key',
  ActivationCode: 'activation code',
  VirtualHost: 'virtual host',
  AccountChange: 'account change',
  AccountChangePlan: 'change plan',
  Tenant: 'tenant settings',
};
const PATHS: Record<string, string> = { User: 'users', Group: 'groups', App: 'apps', Script: 'scripts' };

function useNamer() {
  const kinds: Record<string, Map<string, Doc>> = {
    User: useLive('User').byId,
    Group: useLive('Group').byId,
    App: useLive('App').byId,
    Script: useLive('Script').byId,
  };
  return (kind: string, id: string) => {
    const d = kinds[kind]?.get(id);
    if (!d) return id;
    return kind === 'User' ? userName(d) : String(d.Name || id);
  };
}

/** The route's parameters read from the path (`/groups/:id/members/:user` and `/groups/g1/members/u1`). */
function params(route: string, path: string): Record<string, string> {
  const r = route.split('/');
  const p = path.split('/');
  const out: Record<string, string> = {};
  r.forEach((part, i) => {
    if (part.startsWith(':')) out[part.slice(1)] = decodeURIComponent(p[i] ?? '');
  });
  return out;
}

/** Routes beyond create, change and delete, in words. */
const ACTIONS: Record<string, (n: (k: string, id: string) => string, p: Record<string, string>) => string> = {
  'POST /groups/:id/members/:user': (n, p) => `added ${n('User', p.user ?? '')} to ${n('Group', p.id ?? '')}`,
  'DELETE /groups/:id/members/:user': (n, p) =>
    `removed ${n('User', p.user ?? '')} from ${n('Group', p.id ?? '')}`,
  'POST /users/:id/disable': (n, p) => `disabled ${n('User', p.id ?? '')}`,
  'POST /users/:id/merge': (n, p) => `merged another user into ${n('User', p.id ?? '')}`,
  'POST /apps/:id/proxytoken': (n, p) => `issued a proxy token for ${n('App', p.id ?? '')}`,
  'POST /apps/:id/oidc/secret': (n, p) => `issued a client secret for ${n('App', p.id ?? '')}`,
};

/** What an entry did, in words: "created user ada@example.com", or the method and path. */
function What({ e, name }: { e: Doc; name: (kind: string, id: string) => string }) {
  const route = String(e.Route);
  const op = /^\/groups\/:id\/members\/:user\/([a-z]+)$/.exec(route);
  if (op) {
    const p = params(route, String(e.Path));
    return (
      <>
        {PAST[op[1] ?? ''] ?? op[1]} {name('User', p.user ?? '')} in {name('Group', p.id ?? '')}
      </>
    );
  }
  const signin = SIGNIN[`${e.Method} ${route}`];
  if (signin) return <>{e.Status >= 400 ? signin[1] : signin[0]}</>;
  const action = ACTIONS[`${e.Method} ${route}`];
  if (action) return <>{action(name, params(route, String(e.Path)))}</>;
  const verb = VERB[String(e.Method)];
  const generic = /^\/[a-z]+(\/:id)?$/.test(String(e.Route));
  if (verb && e.Kind && e.ObjectID && generic) {
    const label = name(String(e.Kind), String(e.ObjectID));
    const section = PATHS[String(e.Kind)];
    const obj =
      section && e.Method !== 'DELETE' ? (
        <Link href={`/console/${section}/${seg(String(e.ObjectID))}`}>{label}</Link>
      ) : (
        label
      );
    return (
      <>
        {e.Status >= 400 ? `tried to ${verb.replace(/d$/, '')} ` : `${verb} `}
        {KIND_WORDS[String(e.Kind)] ?? e.Kind} {obj}
      </>
    );
  }
  return (
    <>
      <code>{e.Method}</code> <code>{e.Path}</code>
    </>
  );
}

export function AuditView() {
  const entries = useLive('AuditEntry');
  const users = useLive('User');
  const name = useNamer();
  const [who, setWho] = useState('');
  const [kind, setKind] = useState('');
  const [refusals, setRefusals] = useState(false);
  const [text, setText] = useState('');
  const kinds = [...new Set(entries.items.map((e) => String(e.Kind)).filter(Boolean))].sort();
  const actors = [...new Set(entries.items.map((e) => String(e.UserID)).filter(Boolean))];
  const shown = entries.items
    .filter(
      (e) =>
        (who === '' || e.UserID === who) &&
        (kind === '' || e.Kind === kind) &&
        (!refusals || e.Status >= 400),
    )
    .filter(
      (e) =>
        text === '' ||
        `${e.Path} ${e.Address} ${e.UserAgent} ${e.Rule ?? ''}`.toLowerCase().includes(text.toLowerCase()),
    )
    .sort((a, b) => Number(b.TimeMs) - Number(a.TimeMs))
    .slice(0, 300);
  return (
    <>
      <Heading>Audit trail</Heading>
      <section class="card">
        <div class="filters">
          <div>
            <label for="au-who">Who</label>
            <select id="au-who" value={who} onChange={(e) => setWho(e.currentTarget.value)}>
              <option value="">Anyone</option>
              {actors.map((id) => (
                <option key={id} value={id}>
                  {userName(users.byId.get(id)) || id}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="au-kind">Object type</label>
            <select id="au-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
              <option value="">Any</option>
              {kinds.map((k) => (
                <option key={k} value={k}>
                  {k}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="au-text">Path, address or rule contains</label>
            <input id="au-text" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          </div>
          <div class="check">
            <input
              id="au-refused"
              type="checkbox"
              checked={refusals}
              onChange={(e) => setRefusals(e.currentTarget.checked)}
            />
            <label for="au-refused">Only refusals</label>
          </div>
        </div>
        <p class="muted" role="status">
          {entries.ready ? `${shown.length} entries shown` : 'Loading…'}
        </p>
        <table class="list audit">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Who</th>
              <th scope="col">What</th>
              <th scope="col">Answer</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((e) => (
              <tr key={e.ID}>
                <td class="nowrap">{when(e.Time)}</td>
                <td>
                  {e.UserID
                    ? userName(users.byId.get(e.UserID)) || e.UserID
                    : e.KeyID
                      ? `key ${e.KeyID}`
                      : 'anonymous'}
                  <div class="muted small">
                    {e.Via} · {e.Address}
                  </div>
                </td>
                <td>
                  <What e={e} name={name} />
                  {e.Rule ? <div class="muted small">rule: {e.Rule}</div> : null}
                </td>
                <td>
                  <Badge on={e.Status < 400} bad={e.Status >= 400}>
                    {e.Status}
                  </Badge>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </>
  );
}
