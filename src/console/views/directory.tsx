/** Provisioning: accounts, account changes and plans with their lifecycle, provisioning agents (docs/directory.md). */
import { useState } from 'preact/hooks';
import { call, explain, seg } from '../api.js';
import { useLive } from '../live.js';
import { Badge, confirmAction, Heading, Link, type Note, Notice, userName, when } from '../ui.js';

const CHANGE_OPS: Record<string, string[]> = {
  planned: ['approve', 'cancel'],
  approved: ['cancel'],
  failed: ['retry', 'cancel'],
};
const PLAN_OPS: Record<string, string[]> = { proposed: ['approve', 'cancel'], approved: ['cancel'] };

/** What exists on the targets (accounts) and who reports (proxies and provisioning agents). */
function AccountsAndAgents() {
  const accounts = useLive('Account').items;
  const agents = useLive('RemoteAgent').items;
  const users = useLive('User').byId;
  const apps = useLive('App').byId;
  const app = (id: string) => String(apps.get(id)?.Name ?? id);
  const who = (id: string) => userName(users.get(id)) || id;
  return (
    <>
      <section class="card" aria-labelledby="accounts-h">
        <h2 id="accounts-h">Accounts</h2>
        {accounts.length === 0 && <p class="muted">No account.</p>}
        <ul class="plain">
          {accounts.map((a) => (
            <li key={a.ID}>
              <span>
                <code>{a.Name}</code> on {app(a.AppID)} for{' '}
                <Link href={`/console/users/${seg(a.UserID)}`}>{who(a.UserID)}</Link>
              </span>
              <Badge on={a.State === 'active'}>{a.State}</Badge>
            </li>
          ))}
        </ul>
      </section>
      <section class="card" aria-labelledby="agents-h">
        <h2 id="agents-h">Agents</h2>
        {agents.length === 0 && <p class="muted">No proxy or provisioning agent has reported.</p>}
        <ul class="plain">
          {agents.map((a) => (
            <li key={a.ID}>
              <span>
                {String(a.Name || a.ID)}{' '}
                <span class="muted">
                  {a.Kind} · {app(a.AppID)} · {a.Address} · last seen {when(a.LastSeen)}
                </span>
              </span>
              <Badge on={a.Health === 'ok'}>{a.Health}</Badge>
            </li>
          ))}
        </ul>
      </section>
    </>
  );
}

export function DirectoryView() {
  const changes = useLive('AccountChange').items.sort((a, b) => String(b.ID).localeCompare(String(a.ID)));
  const plans = useLive('AccountChangePlan').items;
  const users = useLive('User').byId;
  const apps = useLive('App').byId;
  const [note, setNote] = useState<Note>();
  const app = (id: string) => String(apps.get(id)?.Name ?? id);
  const who = (id: string) => userName(users.get(id)) || id;
  const act = async (path: string, op: string, what: string) => {
    if (op === 'cancel') {
      const ok = await confirmAction({
        title: 'Cancel',
        body: <p>{what} is cancelled and will not be applied.</p>,
        action: `Cancel ${what}`,
        danger: true,
      });
      if (!ok) return;
    }
    try {
      await call('POST', `${path}/${op}`, { json: {} });
      setNote({ kind: 'ok', text: `${what}: ${op} done.` });
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <>
      <Heading>Provisioning</Heading>
      <Notice note={note} />
      <section class="card" aria-labelledby="plans-h">
        <h2 id="plans-h">Change plans</h2>
        {plans.length === 0 && <p class="muted">No plan.</p>}
        <ul class="plain">
          {plans.map((p) => (
            <li key={p.ID}>
              <span>
                {String(p.Name || p.ID)} <Badge on={p.State === 'approved'}>{p.State}</Badge>{' '}
                <span class="muted">{String(p.Reason ?? '')}</span>
              </span>
              <span>
                {(PLAN_OPS[p.State] ?? []).map((op) => (
                  <button
                    key={op}
                    type="button"
                    class={op === 'cancel' ? 'danger small' : 'small'}
                    onClick={() => act(`/accountchangeplans/${seg(p.ID)}`, op, `the plan ${p.Name || p.ID}`)}
                  >
                    {op === 'approve' ? 'Approve' : 'Cancel plan'}
                  </button>
                ))}
              </span>
            </li>
          ))}
        </ul>
      </section>
      <section class="card" aria-labelledby="changes-h">
        <h2 id="changes-h">Account changes</h2>
        {changes.length === 0 && <p class="muted">No change.</p>}
        <table class="list" hidden={changes.length === 0}>
          <thead>
            <tr>
              <th scope="col">Change</th>
              <th scope="col">User</th>
              <th scope="col">App</th>
              <th scope="col">State</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {changes.map((c) => (
              <tr key={c.ID}>
                <td>
                  {c.Action} {c.AccountName ? <code>{c.AccountName}</code> : null}
                  {c.Error ? <div class="bad small">{c.Error}</div> : null}
                </td>
                <td>
                  <Link href={`/console/users/${seg(c.UserID)}`}>{who(c.UserID)}</Link>
                </td>
                <td>{app(c.AppID)}</td>
                <td>
                  <Badge on={c.State === 'applied'}>{c.State}</Badge>
                </td>
                <td class="row-actions">
                  {(CHANGE_OPS[c.State] ?? []).map((op) => (
                    <button
                      key={op}
                      type="button"
                      class={op === 'cancel' ? 'danger small' : 'small'}
                      onClick={() =>
                        act(
                          `/accountchanges/${seg(c.ID)}`,
                          op,
                          `the ${c.Action} of ${who(c.UserID)} on ${app(c.AppID)}`,
                        )
                      }
                    >
                      {op[0]?.toUpperCase()}
                      {op.slice(1)}
                    </button>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <AccountsAndAgents />
    </>
  );
}
