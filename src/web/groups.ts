import type { FastifyInstance } from 'fastify';
import { ApiError } from '../core/errors.js';
import { esc } from '../core/html.js';
import { allowedNext } from '../groups/check.js';
import {
  applyOp,
  expiryDue,
  type GroupSettings,
  groupSettings,
  loadGroup,
  rolesOf,
  stateOf,
} from '../groups/lifecycle.js';
import type { MemberOp } from '../groups/states.js';
import { rowsFor } from '../groups/states.js';
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { registerApprovalsPage } from './approvals.js';
import {
  formOf,
  guarded,
  localTime,
  OPTIONAL,
  page,
  reasonField,
  returnOrigins,
  signedIn,
  toSignin,
} from './grouppages.js';

/**
 * Access-request pages on the sign-in site, rendered on the server (no script):
 * - GET  /signin/groups/:id?next=URL   a group as the signed-in user sees it, with the one action
 *                                      their membership allows (ask to join with a reason, activate);
 * - POST /signin/groups/:id            form action=request|activate, reason, next;
 * - GET  /signin/approvals             pending requests the signed-in approver may decide;
 * - POST /signin/approvals             form group, user, action=approve|reject, reason.
 * Not signed in (or not at the integrity level the tenant requires): redirected to the sign-in
 * page, which returns here. Form posts pass the session CSRF rule (same Origin) of the session
 * authenticator. `next` is followed only when it is a path here or on an allowed origin.
 */

const groupPath = (id: string, next: string) =>
  `/signin/groups/${encodeURIComponent(id)}${next ? `?next=${encodeURIComponent(next)}` : ''}`;

function groupPage(
  group: GroupSettings,
  description: string,
  doc: Doc | undefined,
  opts: { next: string; nextOk: string | undefined; level: number | undefined; self: string },
) {
  const state = stateOf(doc);
  const nextField = opts.next ? `<input type="hidden" name="next" value="${esc(opts.next)}">` : '';
  const action = `/signin/groups/${esc(encodeURIComponent(group.ID))}`;
  const requestForm = (label: string) =>
    `<form method="post" action="${action}"><input type="hidden" name="action" value="request">${nextField}
<label for="reason">Why do you need access?</label><textarea id="reason" name="reason" rows="3" maxlength="1024"></textarea>
<button type="submit" id="request" class="block">${esc(label)}</button></form>`;
  let body = `<h1 id="h-group">Access to ${esc(group.Name || group.ID)}</h1>`;
  body += description
    ? `<p class="lead">${esc(description)}</p>`
    : '<p class="lead">A group of this service.</p>';
  if (opts.next && !opts.nextOk)
    body += `<p class="alert warn">The return address is not on this service's allow-list, so you will stay here.</p>`;
  switch (state) {
    case 'none':
      body += `<p id="state" data-state="none">You are not a member of this group.</p>`;
      body += requestForm(group.RequiresApproval ? 'Request access' : 'Join');
      if (group.RequiresApproval)
        body += '<p class="muted">An approver of the group will decide on your request.</p>';
      break;
    case 'expired':
      body += `<p id="state" data-state="expired" class="alert info">Your membership expired because it was not used.</p>`;
      body += requestForm(group.RequiresApproval ? 'Request access again' : 'Join again');
      break;
    case 'requested':
      body += `<p id="state" data-state="requested" class="alert info">Your request is waiting for an approver.</p>`;
      if (doc?.Reason) body += `<p class="muted">Your reason: ${esc(doc.Reason)}</p>`;
      if (doc?.RequestTime) body += `<p class="muted">Asked ${localTime(doc.RequestTime)}</p>`;
      break;
    case 'approved':
      body += `<p id="state" data-state="approved" class="alert ok">Your membership is approved. Activate it to use it.</p>
<form method="post" action="${action}"><input type="hidden" name="action" value="activate">${nextField}<button type="submit" id="activate" class="block">Activate</button></form>`;
      break;
    case 'active':
      body += `<p id="state" data-state="active" class="alert ok">You are an active member of this group.</p>`;
      if (opts.level !== undefined && opts.level < group.IntegrityLevel)
        body += `<p class="alert warn" id="stepup">Using this group needs a stronger sign-in than this one. <a href="/signin?return=${esc(encodeURIComponent(opts.self))}">Confirm it’s you</a></p>`;
      if (opts.nextOk) body += `<p><a id="continue" href="${esc(opts.nextOk)}">Continue</a></p>`;
      break;
    case 'rejected': {
      const rej = (doc?.Rejection ?? {}) as Doc;
      body += `<p id="state" data-state="rejected" class="alert error">Your membership was rejected${rej.Reason ? `: ${esc(rej.Reason)}` : '.'}</p><p class="muted">Ask an approver of the group if you think this is a mistake.</p>`;
      break;
    }
  }
  return `<section class="card" aria-labelledby="h-group">${body}</section>`;
}

export function registerGroupPages(app: FastifyInstance, ctx: ServiceContext) {
  registerMembershipPage(app, ctx);
  registerApprovalsPage(app, ctx);
}

/** /signin/groups/:id: a person's membership of one group, to request or activate it. */
function registerMembershipPage(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;

  app.get<{ Params: { id: string }; Querystring: { next?: string } }>(
    '/signin/groups/:id',
    OPTIONAL,
    (req, reply) =>
      guarded(ctx, reply, async () => {
        const next = typeof req.query.next === 'string' ? req.query.next : '';
        const p = await signedIn(ctx, req);
        if (!p) return toSignin(ctx, req, reply, groupPath(req.params.id, next));
        const g = await store.get(Group, req.params.id);
        if (!g) throw new ApiError('NotFound', `group ${req.params.id} does not exist`);
        const group = groupSettings(g.doc);
        const m = await store.get(Membership, membershipId(group.ID, p.userId));
        // A GET changes nothing: an overdue membership is shown as expired (the next write records it).
        const doc = m && expiryDue(group, m.doc) ? { ...m.doc, State: 'expired' } : m?.doc;
        const nextOk = next ? allowedNext(next, await returnOrigins(ctx, req)) : undefined;
        const body = groupPage(group, String(g.doc.Description ?? ''), doc, {
          next,
          nextOk,
          level: p.via === 'session' ? (p.integrityLevel ?? 0) : undefined,
          self: groupPath(group.ID, next),
        });
        return page(ctx, reply, 200, `Access to ${group.Name}`, body);
      }),
  );

  app.post<{ Params: { id: string } }>('/signin/groups/:id', OPTIONAL, (req, reply) =>
    guarded(ctx, reply, async () => {
      const form = formOf(req);
      const next = form.next ?? '';
      const p = await signedIn(ctx, req);
      if (!p) return toSignin(ctx, req, reply, groupPath(req.params.id, next));
      const group = await loadGroup(ctx, req.params.id);
      const roles = await rolesOf(ctx, p, group, p.userId);
      let op: MemberOp;
      if (form.action === 'request') op = roles.has('admin') ? 'add' : 'request';
      else if (form.action === 'activate') op = 'activate';
      else throw new ApiError('BadRequest', 'action must be request or activate', { field: 'action' });
      if (rowsFor(op, roles).length === 0) throw new ApiError('Forbidden', `you may not ${op} here`);
      const reason = reasonField(form);
      const { obj } = await applyOp(ctx, { op, group, userId: p.userId, actor: p, roles, reason });
      const nextOk = next ? allowedNext(next, await returnOrigins(ctx, req)) : undefined;
      if (obj?.doc.State === 'active' && nextOk) return reply.redirect(nextOk, 303);
      return reply.redirect(groupPath(group.ID, next), 303);
    }),
  );
}
