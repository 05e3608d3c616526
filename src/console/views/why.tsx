/**
 * The "why" of a decision: GET /policy/explain answers whether a user may use an App, or an
 * actor do an action on an object, with the rule that decided and the chain of rules behind it.
 */
import { useState } from 'preact/hooks';
import { call, type Doc, explain } from '../api.js';
import { useLive } from '../live.js';
import { Badge, Heading, type Note, Notice, useLoad, userName } from '../ui.js';

interface Decision {
  Actor?: string;
  Action?: string;
  Allowed: boolean;
  Rule: string;
  Reason: string;
  Chain?: { Rule: string; Allowed: boolean; Reason: string }[];
}

function Answer({ d }: { d: Decision }) {
  return (
    <section class="card decision" aria-labelledby="decision-h">
      <h2 id="decision-h">{d.Allowed ? 'Allowed' : 'Refused'}</h2>
      {d.Actor && (
        <p class="muted">
          {d.Actor}
          {d.Action ? <> · {d.Action}</> : null}
        </p>
      )}
      <p>
        <Badge on={d.Allowed} bad={!d.Allowed}>
          {d.Allowed ? 'allowed' : 'refused'}
        </Badge>{' '}
        by the rule <code>{d.Rule}</code>: {d.Reason}
      </p>
      {(d.Chain ?? []).length > 0 && (
        <>
          <h3>How the decision was reached</h3>
          <ol class="chain">
            {(d.Chain ?? []).map((c, i) => (
              <li key={`${c.Rule}-${String(i)}`}>
                <code>{c.Rule}</code>{' '}
                <Badge on={c.Allowed} bad={!c.Allowed}>
                  {c.Allowed ? 'allows' : 'refuses'}
                </Badge>{' '}
                {c.Reason}
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  );
}

const findUser = (users: Doc[], text: string) => {
  const t = text.trim().toLowerCase();
  return users.find(
    (u) =>
      u.ID === text.trim() || String(u.Email).toLowerCase() === t || String(u.UserName).toLowerCase() === t,
  );
};

/** "May this actor do this?": an actor (user or API key), an action, a kind and an object. */
interface ActionInfo {
  Action: string;
  Description: string;
  Target: string;
}

function ActorForm({ users, ask }: { users: Doc[]; ask: (query: string) => void }) {
  // The policy's own list of actions (GET /policy/actions), each with the kind it acts on.
  const [actions] = useLoad(() => call<ActionInfo[]>('GET', '/policy/actions').then((r) => r.data), []);
  const [actor, setActor] = useState('');
  const [action, setAction] = useState('');
  const [kind, setKind] = useState('');
  const [object, setObject] = useState('');
  const chosen = action || actions?.[0]?.Action || '';
  const actorAction = (e: Event) => {
    e.preventDefault();
    const u = findUser(users, actor);
    const q: Record<string, string> = { actor: u ? String(u.ID) : actor.trim(), action: chosen };
    if (kind.trim()) q.kind = kind.trim();
    if (object.trim()) q.id = object.trim();
    ask(new URLSearchParams(q).toString());
  };
  return (
    <section class="card" aria-labelledby="why-act-h">
      <h2 id="why-act-h">May this actor do this?</h2>
      <form onSubmit={actorAction}>
        <div class="row">
          <div>
            <label for="why-actor">Actor (user or API key ID)</label>
            <input
              id="why-actor"
              list="why-users"
              required
              value={actor}
              onInput={(e) => setActor(e.currentTarget.value)}
              autocomplete="off"
            />
          </div>
          <div>
            <label for="why-action">Action</label>
            <select
              id="why-action"
              value={chosen}
              onChange={(e) => {
                setAction(e.currentTarget.value);
                setKind('');
              }}
            >
              {(actions ?? []).map((a) => (
                <option key={a.Action} value={a.Action}>
                  {a.Action}: {a.Description}
                </option>
              ))}
            </select>
          </div>
        </div>
        <div class="row">
          <div>
            <label for="why-kind">Object type</label>
            <input
              id="why-kind"
              value={kind}
              placeholder={actions?.find((a) => a.Action === chosen)?.Target ?? ''}
              onInput={(e) => setKind(e.currentTarget.value)}
              aria-describedby="why-kind-hint"
            />
            <p class="muted hint" id="why-kind-hint">
              Empty: the one the action acts on.
            </p>
          </div>
          <div>
            <label for="why-object">Object ID</label>
            <input
              id="why-object"
              value={object}
              onInput={(e) => setObject(e.currentTarget.value)}
              aria-describedby="why-object-hint"
            />
            <p class="muted hint" id="why-object-hint">
              A membership is named group ID.user ID.
            </p>
          </div>
          <button type="submit" class="narrow-btn">
            Explain this action
          </button>
        </div>
      </form>
    </section>
  );
}

export function WhyView() {
  const users = useLive('User').items;
  const apps = useLive('App').items;
  const [who, setWho] = useState('');
  const [app, setApp] = useState('');
  const [decision, setDecision] = useState<Decision>();
  const [note, setNote] = useState<Note>();
  const ask = async (query: string) => {
    setDecision(undefined);
    setNote(undefined);
    try {
      const r = await call<Decision>('GET', `/policy/explain?${query}`);
      setDecision(r.data);
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const userApp = (e: Event) => {
    e.preventDefault();
    const u = findUser(users, who);
    if (!u) return setNote({ kind: 'error', text: `No user ${who}.` });
    ask(new URLSearchParams({ user: String(u.ID), app }).toString());
  };
  return (
    <>
      <Heading>Why</Heading>
      <p class="lead">Ask the policy why a decision comes out as it does.</p>
      <datalist id="why-users">
        {users.map((u) => (
          <option key={u.ID} value={String(u.Email || u.ID)}>
            {userName(u)}
          </option>
        ))}
      </datalist>
      <section class="card" aria-labelledby="why-app-h">
        <h2 id="why-app-h">May this user use this App?</h2>
        <form class="row" onSubmit={userApp}>
          <div>
            <label for="why-user">User</label>
            <input
              id="why-user"
              list="why-users"
              required
              value={who}
              onInput={(e) => setWho(e.currentTarget.value)}
              autocomplete="off"
            />
          </div>
          <div>
            <label for="why-app">App</label>
            <select id="why-app" required value={app} onChange={(e) => setApp(e.currentTarget.value)}>
              <option value="">Choose an App</option>
              {apps.map((a) => (
                <option key={a.ID} value={a.ID}>
                  {String(a.Name || a.ID)}
                </option>
              ))}
            </select>
          </div>
          <button type="submit" class="narrow-btn">
            Explain
          </button>
        </form>
      </section>
      <ActorForm users={users} ask={ask} />
      <Notice note={note} />
      {decision && <Answer d={decision} />}
    </>
  );
}
