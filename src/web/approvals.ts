import type { FastifyInstance } from 'fastify';
import { requiredLevel, tenantDoc } from '../auth/integrity.js';
import type { Principal } from '../auth/principal.js';
import { insufficientIntegrity } from '../auth/session/authenticator.js';
import { ApiError } from '../core/errors.js';
import { esc } from '../core/html.js';
import {
  actsAsUser,
  applyOp,
  expiryDue,
  type GroupSettings,
  groupSettings,
  loadGroup,
  rolesOf,
} from '../groups/lifecycle.js';
import { iterateObjects } from '../groups/report.js';
import { rowsFor } from '../groups/states.js';
import { Group } from '../objects/group.js';
import { Membership } from '../objects/membership.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { formOf, guarded, localTime, OPTIONAL, page, reasonField, signedIn, toSignin } from './grouppages.js';

/*
 * /signin/approvals: the access requests a person may decide (every group for an administrator,
 * else the groups they approve for), each with a form to approve or reject with a reason.
 */

/** A request waiting for a decision, with its group and the person who asked. */
interface PendingRequest {
  group: GroupSettings;
  m: Doc;
  user: Doc | undefined;
}

/**
 * The groups whose ApproverGroup makes the caller an approver, from one read of the caller's
 * active memberships (isApprover's rule, without two reads per group of the tenant: any user
 * may load this page, so its cost must not grow with every group there is).
 */
async function approverGroupsOf(ctx: ServiceContext, p: Principal, byId: Map<string, GroupSettings>) {
  const counting = new Set<string>();
  // The level a stronger sign-in would reach to count an approver group this session cannot.
  let need = 0;
  if (p.userId === '' || !actsAsUser(p)) return { counting, need };
  const level = p.via === 'session' ? (p.integrityLevel ?? 0) : 0;
  const approverGroups = new Set([...byId.values()].map((g) => g.ApproverGroup));
  for await (const m of iterateObjects(ctx, Membership, {
    filter: [`UserID = ${JSON.stringify(p.userId)}`, 'State = "active"'],
  })) {
    const g = byId.get(String(m.GroupID));
    if (!g || expiryDue(g, m)) continue;
    if (level >= g.IntegrityLevel) counting.add(g.ID);
    else if (p.via === 'session' && approverGroups.has(g.ID)) need = Math.max(need, g.IntegrityLevel);
  }
  return { counting, need };
}

/**
 * The level this session would need to see more on the approvals page, or 0: an administrator
 * below IntegrityAdmin acts as a plain user on these pages, and an approver group may ask for
 * more than the session has. The page then asks for the step-up instead of showing less.
 */
async function adminStepUp(ctx: ServiceContext, p: Principal): Promise<number> {
  if (p.via !== 'session' || p.scopes.has('admin')) return 0;
  const user = await ctx.store.get(User, p.userId);
  return user?.doc.Admin === true ? requiredLevel(await tenantDoc(ctx), 'admin') : 0;
}

/** Pending requests the caller may decide: every group for admins, else the groups they approve. */
async function pending(ctx: ServiceContext, p: Principal) {
  const out: PendingRequest[] = [];
  const groups: GroupSettings[] = [];
  for await (const g of iterateObjects(ctx, Group, { order: 'Name' })) groups.push(groupSettings(g));
  const admin = p.scopes.has('admin');
  const { counting, need } = admin
    ? { counting: new Set<string>(), need: 0 }
    : await approverGroupsOf(ctx, p, new Map(groups.map((g) => [g.ID, g])));
  const approves = (g: GroupSettings) =>
    actsAsUser(p) && p.userId !== '' && (g.Approvers.includes(p.userId) || counting.has(g.ApproverGroup));
  for (const group of groups) {
    if (!admin && !approves(group)) continue;
    const reqs: Doc[] = [];
    for await (const m of iterateObjects(ctx, Membership, {
      filter: [`GroupID = ${JSON.stringify(group.ID)}`, 'State = "requested"'],
      order: 'RequestTime',
    }))
      reqs.push(m);
    for (const m of reqs) {
      if (m.UserID === p.userId) continue; // nobody decides their own request
      out.push({ group, m, user: (await ctx.store.get(User, String(m.UserID)))?.doc });
    }
  }
  return { rows: out, need: Math.max(need, await adminStepUp(ctx, p)) };
}

/** The pending requests as a table, a form per row to approve or reject with a reason. */
function requestsTable(rows: PendingRequest[]): string {
  let body =
    '<section class="card flush"><table class="requests"><thead><tr><th scope="col">Group</th><th scope="col">Person</th><th scope="col">Reason</th><th scope="col">Asked</th><th scope="col">Decision</th></tr></thead><tbody>';
  for (const [i, { group, m, user }] of rows.entries()) {
    const name = (user?.Name as Doc | undefined)?.FullName;
    const who = `${esc(user?.Email || m.UserID)}${name ? `<br><span class="muted">${esc(name)}</span>` : ''}`;
    body += `<tr data-group="${esc(group.ID)}" data-user="${esc(m.UserID)}"><td>${esc(group.Name)}</td><td>${who}</td><td>${m.Reason ? esc(m.Reason) : '<span class="muted">none given</span>'}</td><td>${localTime(m.RequestTime)}</td><td>
<form method="post" action="/signin/approvals" class="decide"><input type="hidden" name="group" value="${esc(group.ID)}"><input type="hidden" name="user" value="${esc(m.UserID)}">
<label for="reason-${i}" class="sr-only">Reason for your decision (optional)</label><input type="text" id="reason-${i}" name="reason" maxlength="1024" placeholder="Reason (optional)">
<div class="row"><button type="submit" name="action" value="approve">Approve</button><button type="submit" name="action" value="reject" class="danger">Reject</button></div></form></td></tr>`;
  }
  body += '</tbody></table></section>';
  return body;
}

/** /signin/approvals: the requests the caller may decide, and the decisions. */
export function registerApprovalsPage(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;
  app.get<{ Querystring: { done?: string } }>('/signin/approvals', OPTIONAL, (req, reply) =>
    guarded(ctx, reply, async () => {
      const p = await signedIn(ctx, req);
      if (!p) return toSignin(ctx, req, reply, '/signin/approvals');
      const { rows, need } = await pending(ctx, p);
      let body = '<h1>Access requests</h1><p class="lead">Requests to join groups that you decide on.</p>';
      const done = req.query.done;
      if (done === 'approve' || done === 'reject')
        body += `<p class="alert ok" id="done" role="status">${done === 'approve' ? 'Approved.' : 'Rejected.'}</p>`;
      if (need > (p.integrityLevel ?? 0)) {
        const { intent } = await insufficientIntegrity(
          req,
          ctx,
          need,
          'the approvals page needs a stronger sign-in',
        );
        const to = `/signin?return=${encodeURIComponent('/signin/approvals')}&intent=${encodeURIComponent(intent)}`;
        body += `<p class="alert warn" id="stepup">${rows.length === 0 ? 'Requests you may decide are shown' : 'More requests are shown'} once you confirm it’s you with another of your sign-in methods. <a href="${esc(to)}">Confirm it’s you</a></p>`;
      }
      if (rows.length === 0) {
        if (need <= (p.integrityLevel ?? 0))
          body += '<section class="card"><p id="empty">No requests are waiting for you.</p></section>';
      } else {
        body += requestsTable(rows);
      }
      return page(ctx, reply, 200, 'Access requests', body, 'approvals');
    }),
  );

  app.post('/signin/approvals', OPTIONAL, (req, reply) =>
    guarded(ctx, reply, async () => {
      const p = await signedIn(ctx, req);
      if (!p) return toSignin(ctx, req, reply, '/signin/approvals');
      const form = formOf(req);
      const op = form.action;
      if (op !== 'approve' && op !== 'reject')
        throw new ApiError('BadRequest', 'action must be approve or reject', { field: 'action' });
      const group = await loadGroup(ctx, form.group ?? '');
      const userId = form.user ?? '';
      const roles = await rolesOf(ctx, p, group, userId);
      if (rowsFor(op, roles).length === 0)
        throw new ApiError('Forbidden', `you may not ${op} members of this group`);
      if (!(await store.get(User, userId))) throw new ApiError('NotFound', `user ${userId} does not exist`);
      await applyOp(ctx, { op, group, userId, actor: p, roles, reason: reasonField(form) });
      return reply.redirect(`/signin/approvals?done=${op}`, 303);
    }),
  );
}
