/**
 * Groups: the live list, the pending access requests of every group, the approvals report (CSV),
 * a new group; one group: its settings, members and their lifecycle (docs/groups.md).
 */
import { useState } from 'preact/hooks';
import { call, type Doc, explain, seg } from '../api.js';
import { ObjectEditor } from '../editor.js';
import { GROUP_FIELDS } from '../fields.js';
import { openCreated, useLive } from '../live.js';
import {
  Badge,
  confirmAction,
  Heading,
  Link,
  Modal,
  type Note,
  Notice,
  navigate,
  userName,
  when,
} from '../ui.js';
import { deleteObject } from './user.js';

/** The operations an administrator may take from each state (docs/groups.md, transitions). */
const OPS: Record<string, [string, string][]> = {
  requested: [
    ['approve', 'Approve'],
    ['reject', 'Reject'],
  ],
  approved: [['remove', 'Remove']],
  active: [['remove', 'Remove']],
  rejected: [
    ['unreject', 'Unreject'],
    ['remove', 'Remove'],
  ],
  expired: [
    ['add', 'Add again'],
    ['remove', 'Remove'],
  ],
};

const DONE: Record<string, (who: string, group: string) => string> = {
  add: (w, g) => `${w} was added to ${g} again.`,
  approve: (w, g) => `${w} may now join ${g}.`,
  reject: (w, g) => `${w}'s request to join ${g} was rejected.`,
  unreject: (w, g) => `The rejection of ${w} in ${g} was taken back: the request waits for a decision.`,
  remove: (w, g) => `${w} was removed from ${g}.`,
};

export function useMembershipOps(setNote: (n: Note) => void) {
  const users = useLive('User').byId;
  const groups = useLive('Group').byId;
  return async (m: Doc, op: string) => {
    const who = userName(users.get(m.UserID)) || m.UserID;
    const group = String(groups.get(m.GroupID)?.Name ?? m.GroupID);
    if (op === 'remove' || op === 'reject') {
      const ok = await confirmAction({
        title: op === 'remove' ? 'Remove member' : 'Reject request',
        body: (
          <p>
            {op === 'remove'
              ? `${who} is no longer a member of ${group}.`
              : `${who}'s request to join ${group} is rejected.`}
          </p>
        ),
        action: op === 'remove' ? `Remove ${who} from ${group}` : `Reject ${who}`,
        danger: true,
      });
      if (!ok) return;
    }
    const base = `/groups/${seg(m.GroupID)}/members/${seg(m.UserID)}`;
    try {
      if (op === 'remove') await call('DELETE', base);
      else await call('POST', op === 'add' ? base : `${base}/${op}`, { json: {} });
      setNote({ kind: 'ok', text: DONE[op]?.(who, group) ?? `${who}: ${op} done in ${group}.` });
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
}

function MemberRow({
  m,
  act,
  showGroup,
}: {
  m: Doc;
  act: (m: Doc, op: string) => void;
  showGroup?: boolean;
}) {
  const users = useLive('User').byId;
  const groups = useLive('Group').byId;
  return (
    <tr>
      <td>
        <Link href={`/console/users/${seg(m.UserID)}`}>{userName(users.get(m.UserID)) || m.UserID}</Link>
      </td>
      {showGroup && (
        <td>
          <Link href={`/console/groups/${seg(m.GroupID)}`}>
            {String(groups.get(m.GroupID)?.Name ?? m.GroupID)}
          </Link>
        </td>
      )}
      <td>
        <Badge on={m.State === 'active'}>{m.State}</Badge>
      </td>
      <td>{String(m.Reason ?? '')}</td>
      <td>{when(m.LastChange?.Time)}</td>
      <td class="row-actions">
        {(OPS[m.State] ?? []).map(([op, label]) => (
          <button
            key={op}
            type="button"
            class={op === 'remove' || op === 'reject' ? 'danger small' : 'small'}
            onClick={() => act(m, op)}
          >
            {label}
          </button>
        ))}
      </td>
    </tr>
  );
}

export function GroupsView() {
  const groups = useLive('Group');
  const pending = useLive('Membership').items.filter((m) => m.State === 'requested');
  const [q, setQ] = useState('');
  const [creating, setCreating] = useState(false);
  const [note, setNote] = useState<Note>();
  const act = useMembershipOps(setNote);
  const shown = groups.items
    .filter(
      (g) =>
        q === '' ||
        [g.Name, g.Description, g.ID].some((v) => String(v).toLowerCase().includes(q.toLowerCase())),
    )
    .sort((a, b) => String(a.Name).localeCompare(String(b.Name)));
  const create = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    try {
      const r = await call('POST', '/groups', {
        json: { Name: String(f.get('name')), Description: String(f.get('description') ?? '') },
      });
      setCreating(false);
      await openCreated('Group', 'groups', r);
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <>
      <div class="head">
        <Heading>Groups</Heading>
        <button type="button" onClick={() => setCreating(true)}>
          New group
        </button>
      </div>
      <Notice note={note} />
      <section class="card" aria-labelledby="pending-h">
        <h2 id="pending-h">Pending access requests</h2>
        {pending.length === 0 ? (
          <p class="muted">No request is waiting.</p>
        ) : (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Who</th>
                <th scope="col">Group</th>
                <th scope="col">State</th>
                <th scope="col">Reason</th>
                <th scope="col">Asked</th>
                <th scope="col">Decide</th>
              </tr>
            </thead>
            <tbody>
              {pending.map((m) => (
                <MemberRow key={m.ID} m={m} act={act} showGroup />
              ))}
            </tbody>
          </table>
        )}
        <p>
          <a href="/groups/report.csv" download="approvals.csv">
            Download the approvals report (CSV)
          </a>
        </p>
      </section>
      <section class="card">
        <div class="search">
          <label for="group-search">Search</label>
          <input id="group-search" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        </div>
        <ul class="plain">
          {shown.map((g) => (
            <li key={g.ID}>
              <span>
                <Link href={`/console/groups/${seg(g.ID)}`}>{String(g.Name || g.ID)}</Link>{' '}
                <span class="muted">{String(g.Description ?? '')}</span>
              </span>
              {g.RequiresApproval && <Badge>approval</Badge>}
            </li>
          ))}
        </ul>
      </section>
      {creating && (
        <Modal title="New group" onClose={() => setCreating(false)}>
          <form onSubmit={create}>
            <label for="ng-name">Name</label>
            <input id="ng-name" name="name" required autocomplete="off" />
            <label for="ng-desc">Description</label>
            <input id="ng-desc" name="description" autocomplete="off" />
            <div class="actions">
              <button type="button" class="secondary" onClick={() => setCreating(false)}>
                Cancel
              </button>
              <button type="submit">Create group</button>
            </div>
          </form>
        </Modal>
      )}
    </>
  );
}

export function GroupView({ id }: { id: string }) {
  const groups = useLive('Group');
  const users = useLive('User');
  const members = useLive('Membership').items.filter((m) => m.GroupID === id);
  const [note, setNote] = useState<Note>();
  const [who, setWho] = useState('');
  const act = useMembershipOps(setNote);
  const g = groups.byId.get(id);
  if (!g) return <p class="muted">{groups.ready ? 'No such group.' : 'Loading…'}</p>;
  const add = async (e: Event) => {
    e.preventDefault();
    const text = who.trim().toLowerCase();
    const u = users.items.find(
      (x) =>
        x.ID === who.trim() ||
        String(x.Email).toLowerCase() === text ||
        String(x.UserName).toLowerCase() === text,
    );
    if (!u) return setNote({ kind: 'error', text: `No user ${who}.` });
    try {
      await call('POST', `/groups/${seg(id)}/members/${seg(u.ID)}`, { json: {} });
      setNote({ kind: 'ok', text: `${userName(u)} was added to ${g.Name}.` });
      setWho('');
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const remove = async () => {
    const ok = await confirmAction({
      title: 'Delete group',
      body: (
        <p>
          The group {g.Name} and its {members.length} memberships are deleted. Apps that name it in their
          access groups stop admitting its members.
        </p>
      ),
      action: `Delete ${g.Name}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await deleteObject(`/groups/${seg(id)}`);
      navigate('/console/groups');
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <>
      <p class="crumbs">
        <Link href="/console/groups">All groups</Link>
      </p>
      <div class="head">
        <Heading>{String(g.Name || id)}</Heading>
        <button type="button" class="danger" onClick={remove}>
          Delete group…
        </button>
      </div>
      <Notice note={note} />
      <section class="card" aria-labelledby="members-h">
        <h2 id="members-h">Members</h2>
        <form class="row" onSubmit={add}>
          <div>
            <label for="add-member">E-mail</label>
            <input
              id="add-member"
              list="add-member-users"
              value={who}
              onInput={(e) => setWho(e.currentTarget.value)}
              required
              autocomplete="off"
              aria-describedby="add-member-hint"
            />
            <datalist id="add-member-users">
              {users.items.map((u) => (
                <option key={u.ID} value={String(u.Email || u.UserName || u.ID)} />
              ))}
            </datalist>
            <p class="muted hint" id="add-member-hint">
              The new member's e-mail address, user name or ID.
            </p>
          </div>
          <button type="submit" class="narrow-btn">
            Add member
          </button>
        </form>
        {members.length === 0 ? (
          <p class="muted">No members yet.</p>
        ) : (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Member</th>
                <th scope="col">State</th>
                <th scope="col">Reason</th>
                <th scope="col">Last change</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {members.map((m) => (
                <MemberRow key={m.ID} m={m} act={act} />
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section class="card" aria-labelledby="settings-h">
        <h2 id="settings-h">Settings and approvers</h2>
        <ObjectEditor path={`/groups/${seg(id)}`} fields={GROUP_FIELDS} current={g} />
      </section>
    </>
  );
}
