import { requiredLevel, tenantDoc } from '../auth/integrity.js';
import { authResponse, otherSession } from '../auth/response.js';
import { listSessions, sessionById } from '../auth/session/sessions.js';
import { Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import { StreamError } from './protocol.js';
import type { SessionChange, SpecialKind, SpecialKindContext } from './special.js';

/**
 * Kind Auth: the current session's AuthResponse (as POST /auth answers without an intent, against
 * the tenant's read level), one frame with the session ID, the marker, then a frame whenever it
 * changes: a write to the session, to its user (Active, an enrolled factor, the e-mail address:
 * every factor step that does not touch the session writes the user) or to the tenant (the
 * required level). A change of integrity level is followed by the StatusCode 100 frame and the close.
 */
export const authKind: SpecialKind = {
  async subscribe(ctx) {
    const sid = ctx.principal.sessionId;
    if (!sid) throw new StreamError(400, 'Auth follows a sign-in session; these credentials have none');
    if (ctx.id !== undefined && ctx.id !== sid)
      throw new StreamError(404, 'Auth follows the current session only: omit ID or give its ID');
    const { service } = ctx;
    let last = '';
    // One read-and-send at a time, in order: a slow read must not send an older state after a newer one.
    let queue: Promise<void> = Promise.resolve();
    const read = async () => {
      const s = await sessionById(service, sid);
      const need = requiredLevel(await tenantDoc(service), 'read');
      const item = s ? JSON.stringify(await authResponse(service, s, need)) : '{}';
      if (item === last) return; // a touch (last seen) changes nothing shown
      last = item;
      ctx.send({ ID: sid, Item: JSON.parse(item) as Record<string, unknown> });
    };
    const push = () => {
      const next = queue.then(read);
      queue = next.catch((err) => ctx.logger.warn({ err }, 'event stream: cannot read the AuthResponse'));
      return next;
    };
    const userId = ctx.principal.userId;
    let live = false;
    const offObjects = ctx.onObjectChange((ev) => {
      if (!live) return; // before the marker, followAfterSnapshot's reads cover it
      if ((ev.type === User.kind && ev.id === userId) || ev.type === Tenant.kind) void push().catch(() => {});
    });
    const relevant = (ev: SessionChange) =>
      ev.sessionId === sid || (ev.sessionId === '' && ev.userId === userId);
    try {
      const off = await followAfterSnapshot(ctx, relevant, push, push);
      live = true;
      // A user or tenant write between the snapshot and now: read once more (deduplicated).
      await push();
      return () => {
        off();
        offObjects();
      };
    } catch (err) {
      offObjects();
      throw err;
    }
  },
};

/**
 * Kind OtherSession: the sessions of the caller's user (with ID: that one session), as
 * GET /auth/sessions shows them, then changes; an ended session is a frame with an empty item.
 */
export const otherSessionKind: SpecialKind = {
  async subscribe(ctx) {
    const userId = ctx.principal.userId;
    if (userId === '') throw new StreamError(400, 'OtherSession needs credentials that belong to a user');
    if (ctx.principal.scopes.size === 0)
      throw new StreamError(403, 'OtherSession needs a signed-in session: finish signing in first');
    const { service } = ctx;
    const current = ctx.principal.sessionId;
    const shown = new Map<string, string>();
    const show = (id: string, item: string | undefined) => {
      if (item === undefined) {
        if (shown.delete(id)) ctx.send({ ID: id, Item: {} });
        return;
      }
      if (shown.get(id) === item) return;
      shown.set(id, item);
      ctx.send({ ID: id, Item: JSON.parse(item) as Record<string, unknown> });
    };
    const reload = async () => {
      const all = (await listSessions(service, userId)).filter(
        (s) => ctx.id === undefined || s.id === ctx.id,
      );
      const live = new Map(all.map((s) => [s.id, JSON.stringify(otherSession(s, current))]));
      for (const id of [...shown.keys()]) if (!live.has(id)) show(id, undefined);
      for (const [id, item] of live) show(id, item);
    };
    const relevant = (ev: SessionChange) =>
      ev.userId === userId && (ev.sessionId === '' || ctx.id === undefined || ev.sessionId === ctx.id);
    return followAfterSnapshot(ctx, relevant, reload, async (ev) => {
      if (ev.sessionId === '') return reload();
      const s = ev.deleted ? undefined : await sessionById(service, ev.sessionId);
      show(ev.sessionId, s && s.userId === userId ? JSON.stringify(otherSession(s, current)) : undefined);
    });
  },
};

/**
 * Listens before reading the snapshot, so no change slips between the two: changes seen while
 * the snapshot is read only mark it stale, and it is read again right after the marker.
 */
async function followAfterSnapshot(
  ctx: SpecialKindContext,
  relevant: (ev: SessionChange) => boolean,
  snapshot: () => Promise<void>,
  apply: (ev: SessionChange) => Promise<void>,
): Promise<() => void> {
  let live = false;
  let missed = false;
  const off = ctx.onSessionChange(async (ev) => {
    if (!relevant(ev)) return;
    if (live) await apply(ev);
    else missed = true;
  });
  try {
    await snapshot();
    ctx.caughtUp();
    live = true;
    if (missed) await snapshot();
  } catch (err) {
    off();
    throw err;
  }
  return off;
}
