import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { classify, requiredLevel, tenantDoc } from '../auth/integrity.js';
import type { Principal } from '../auth/principal.js';
import { insufficientIntegrity, ownOrigin } from '../auth/session/authenticator.js';
import { ApiError } from '../core/errors.js';
import { esc } from '../core/html.js';
import { allowedNext, signinBase } from '../groups/check.js';
import {
  actsAsUser,
  applyOp,
  expiryDue,
  type GroupSettings,
  groupSettings,
  loadGroup,
  rolesOf,
  stateOf,
} from '../groups/lifecycle.js';
import { iterateObjects } from '../groups/report.js';
import type { MemberOp } from '../groups/states.js';
import { rowsFor } from '../groups/states.js';
import { App } from '../objects/app.js';
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/context.js';
import { sendHtml } from './errorpage.js';
import { layout } from './pages.js';

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

const OPTIONAL = { config: { auth: 'optional' as const } };

/** A page in the sign-in pages' design (src/web/pages.ts), signed in (the top bar says so). */
async function page(
  ctx: ServiceContext,
  reply: FastifyReply,
  status: number,
  title: string,
  main: string,
  which: 'groups' | 'approvals' = 'groups',
  signedIn = true,
) {
  const tenant = String((await tenantDoc(ctx)).Name || 'Gatehouse');
  // Forms post back here: 'same-origin' keeps the Origin header the CSRF check needs.
  const referrer = 'same-origin';
  return sendHtml(
    reply,
    status,
    layout({ page: which, title, tenant, signedIn, wide: which === 'approvals', main, referrer }),
    referrer,
    { formRedirects: which === 'groups' },
  );
}

/**
 * A time as the reader's clock shows it: the page's script (app.js) rewrites each <time
 * data-local> in the browser's own time zone; without it the UTC time stays, said as such.
 */
export function localTime(iso: unknown): string {
  const ms = Date.parse(String(iso));
  if (!Number.isFinite(ms)) return '';
  const d = new Date(ms).toISOString();
  return `<time datetime="${esc(d)}" data-local>${esc(`${d.slice(0, 10)} ${d.slice(11, 16)} UTC`)}</time>`;
}

async function returnOrigins(ctx: ServiceContext, req: FastifyRequest): Promise<string[]> {
  const tenant = await tenantDoc(ctx);
  const origins = [ownOrigin(req)];
  if (Array.isArray(tenant.AllowedReturnOrigins)) origins.push(...(tenant.AllowedReturnOrigins as string[]));
  if (typeof tenant.SigninURL === 'string' && tenant.SigninURL !== '') {
    try {
      origins.push(new URL(tenant.SigninURL).origin);
    } catch {
      /* not a URL: allows nothing */
    }
  }
  // The applications registered here (App.URL): the proxy in front of one sends people to these
  // pages with `next` on it, and the sign-in flow already returns there.
  for await (const app of iterateObjects(ctx, App, {})) {
    try {
      if (typeof app.URL === 'string' && app.URL !== '') origins.push(new URL(app.URL).origin);
    } catch {
      /* not a URL: allows nothing */
    }
  }
  return origins;
}

/** The signed-in person, or undefined (then the caller redirects to sign-in). */
async function signedIn(ctx: ServiceContext, req: FastifyRequest): Promise<Principal | undefined> {
  const p = req.principal;
  if (!p || p.userId === '' || !actsAsUser(p)) return undefined;
  if (p.via === 'session') {
    // These routes take optional auth (to redirect rather than answer 401), so the tenant's
    // integrity levels are applied here.
    const need = requiredLevel(await tenantDoc(ctx), classify(req, p.scopes.has('admin')));
    if ((p.integrityLevel ?? 0) < need) return undefined;
  }
  return p;
}

/**
 * To the sign-in pages, which come back to `back` (a path here). When they are on this service
 * the return is that path: nothing the client sent (Host, X-Forwarded-*) is in the URL. A
 * sign-in site elsewhere (Tenant.SigninURL) needs an absolute URL; it checks it against its
 * allow-list.
 */
async function toSignin(ctx: ServiceContext, req: FastifyRequest, reply: FastifyReply, back: string) {
  const base = await signinBase(ctx);
  const ret = base.startsWith('/') ? back : `${ownOrigin(req)}${back}`;
  return reply.redirect(`${base}?return=${encodeURIComponent(ret)}`, 303);
}

const formOf = (req: FastifyRequest): Record<string, string> => {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v !== 'string') throw new ApiError('BadRequest', `${k} may be given only once`, { field: k });
    out[k] = v;
  }
  return out;
};

function reasonField(form: Record<string, string>): string {
  const r = form.reason ?? '';
  if (r.length > 1024)
    throw new ApiError('InvalidField', 'the reason is longer than 1024 characters', { field: 'reason' });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(r))
    throw new ApiError('InvalidField', 'the reason must not contain control characters', { field: 'reason' });
  return r;
}

/** Renders an ApiError as an HTML page (these are pages, not API responses). */
async function guarded(ctx: ServiceContext, reply: FastifyReply, fn: () => Promise<unknown>) {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    reply.header('X-Error-Code', e.code);
    return page(
      ctx,
      reply,
      e.status,
      'That did not work',
      `<section class="card" aria-labelledby="h-error"><h1 id="h-error">That did not work</h1>
<p class="alert error" id="error-message">${esc(e.message)}</p><p><a href="/signin/approvals">Access requests</a></p>
<p class="muted">Error ${e.status} · ${esc(e.code)}</p></section>`,
    );
  }
}

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

  /**
   * The groups whose ApproverGroup makes the caller an approver, from one read of the caller's
   * active memberships (isApprover's rule, without two reads per group of the tenant: any user
   * may load this page, so its cost must not grow with every group there is).
   */
  async function approverGroupsOf(p: Principal, byId: Map<string, GroupSettings>) {
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
  async function adminStepUp(p: Principal): Promise<number> {
    if (p.via !== 'session' || p.scopes.has('admin')) return 0;
    const user = await store.get(User, p.userId);
    return user?.doc.Admin === true ? requiredLevel(await tenantDoc(ctx), 'admin') : 0;
  }

  /** Pending requests the caller may decide: every group for admins, else the groups they approve. */
  async function pending(p: Principal) {
    const out: { group: GroupSettings; m: Doc; user: Doc | undefined }[] = [];
    const groups: GroupSettings[] = [];
    for await (const g of iterateObjects(ctx, Group, { order: 'Name' })) groups.push(groupSettings(g));
    const admin = p.scopes.has('admin');
    const { counting, need } = admin
      ? { counting: new Set<string>(), need: 0 }
      : await approverGroupsOf(p, new Map(groups.map((g) => [g.ID, g])));
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
        out.push({ group, m, user: (await store.get(User, String(m.UserID)))?.doc });
      }
    }
    return { rows: out, need: Math.max(need, await adminStepUp(p)) };
  }

  app.get<{ Querystring: { done?: string } }>('/signin/approvals', OPTIONAL, (req, reply) =>
    guarded(ctx, reply, async () => {
      const p = await signedIn(ctx, req);
      if (!p) return toSignin(ctx, req, reply, '/signin/approvals');
      const { rows, need } = await pending(p);
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
        body +=
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
