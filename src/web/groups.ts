import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { classify, requiredLevel, tenantDoc } from '../auth/integrity.js';
import type { Principal } from '../auth/principal.js';
import { ownOrigin } from '../auth/session/authenticator.js';
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
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/context.js';
import { ICON_LINKS } from './favicon.js';

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

const STYLE = `body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.note{background:#f4f4f4;padding:.6rem .8rem;border-radius:4px}
.warn{background:#fff3cd}.error{background:#f8d7da}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}
textarea,input[type=text]{width:100%;box-sizing:border-box}button{margin:.3rem .3rem 0 0;padding:.3rem .8rem}
:root{color-scheme:light dark}@media (prefers-color-scheme:dark){body{color:#e7eaf1;background:#11151d}
a{color:#8fa4ff}.note{background:#1a202b}.warn{background:#3a2a08}.error{background:#3b1714}td,th{border-color:#343c4c}}`;

function page(reply: FastifyReply, status: number, title: string, body: string) {
  reply.header(
    'Content-Security-Policy',
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  );
  reply.header('X-Frame-Options', 'DENY');
  reply.header('Referrer-Policy', 'same-origin');
  reply.header('Cache-Control', 'no-store');
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${esc(title)}</title>${ICON_LINKS}<style>${STYLE}</style></head><body>${body}</body></html>`,
    );
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
async function guarded(reply: FastifyReply, fn: () => Promise<unknown>) {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    reply.header('X-Error-Code', e.code);
    return page(
      reply,
      e.status,
      'Error',
      `<h1>${esc(e.code)}</h1><p class="note error">${esc(e.message)}</p>`,
    );
  }
}

const groupPath = (id: string, next: string) =>
  `/signin/groups/${encodeURIComponent(id)}${next ? `?next=${encodeURIComponent(next)}` : ''}`;

function groupPage(
  group: GroupSettings,
  description: string,
  doc: Doc | undefined,
  opts: { next: string; nextOk: string | undefined; level: number | undefined },
) {
  const state = stateOf(doc);
  const nextField = opts.next ? `<input type="hidden" name="next" value="${esc(opts.next)}">` : '';
  const requestForm = (label: string) =>
    `<form method="post" action="/signin/groups/${esc(encodeURIComponent(group.ID))}"><input type="hidden" name="action" value="request">${nextField}
<p><label for="reason">Why do you need access?</label><br><textarea id="reason" name="reason" rows="3" maxlength="1024"></textarea></p>
<button type="submit" id="request">${esc(label)}</button></form>`;
  let body = `<h1>Access to ${esc(group.Name || group.ID)}</h1>`;
  if (description) body += `<p>${esc(description)}</p>`;
  if (opts.next && !opts.nextOk)
    body += `<p class="note warn">The return address is not on this service's allow-list, so you will stay here.</p>`;
  switch (state) {
    case 'none':
      body += `<p id="state" data-state="none">You are not a member of this group.</p>`;
      body += requestForm(group.RequiresApproval ? 'Request access' : 'Join');
      if (group.RequiresApproval) body += '<p>An approver of the group will decide on your request.</p>';
      break;
    case 'expired':
      body += `<p id="state" data-state="expired">Your membership expired because it was not used.</p>`;
      body += requestForm(group.RequiresApproval ? 'Request access again' : 'Join again');
      break;
    case 'requested':
      body += `<p id="state" data-state="requested" class="note">Your request is waiting for an approver.</p>`;
      if (doc?.Reason) body += `<p>Your reason: ${esc(doc.Reason)}</p>`;
      break;
    case 'approved':
      body += `<p id="state" data-state="approved" class="note">Your membership is approved. Activate it to use it.</p>
<form method="post" action="/signin/groups/${esc(encodeURIComponent(group.ID))}"><input type="hidden" name="action" value="activate">${nextField}<button type="submit" id="activate">Activate</button></form>`;
      break;
    case 'active':
      body += `<p id="state" data-state="active" class="note">You are an active member of this group.</p>`;
      if (opts.level !== undefined && opts.level < group.IntegrityLevel)
        body += `<p class="note warn">Using this group needs a stronger sign-in (integrity level ${group.IntegrityLevel}; your session has ${opts.level}).</p>`;
      if (opts.nextOk) body += `<p><a id="continue" href="${esc(opts.nextOk)}">Continue</a></p>`;
      break;
    case 'rejected': {
      const rej = (doc?.Rejection ?? {}) as Doc;
      body += `<p id="state" data-state="rejected" class="note error">Your membership was rejected${rej.Reason ? `: ${esc(rej.Reason)}` : '.'}</p><p>Ask an approver of the group if you think this is a mistake.</p>`;
      break;
    }
  }
  return body;
}

export function registerGroupPages(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;

  app.get<{ Params: { id: string }; Querystring: { next?: string } }>(
    '/signin/groups/:id',
    OPTIONAL,
    (req, reply) =>
      guarded(reply, async () => {
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
        });
        return page(reply, 200, `Access to ${group.Name}`, body);
      }),
  );

  app.post<{ Params: { id: string } }>('/signin/groups/:id', OPTIONAL, (req, reply) =>
    guarded(reply, async () => {
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
    if (p.userId === '' || !actsAsUser(p)) return counting;
    const level = p.via === 'session' ? (p.integrityLevel ?? 0) : 0;
    for await (const m of iterateObjects(ctx, Membership, {
      filter: [`UserID = ${JSON.stringify(p.userId)}`, 'State = "active"'],
    })) {
      const g = byId.get(String(m.GroupID));
      if (g && level >= g.IntegrityLevel && !expiryDue(g, m)) counting.add(g.ID);
    }
    return counting;
  }

  /** Pending requests the caller may decide: every group for admins, else the groups they approve. */
  async function pending(p: Principal) {
    const out: { group: GroupSettings; m: Doc; user: Doc | undefined }[] = [];
    const groups: GroupSettings[] = [];
    for await (const g of iterateObjects(ctx, Group, { order: 'Name' })) groups.push(groupSettings(g));
    const admin = p.scopes.has('admin');
    const counting = admin
      ? new Set<string>()
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
    return out;
  }

  app.get<{ Querystring: { done?: string } }>('/signin/approvals', OPTIONAL, (req, reply) =>
    guarded(reply, async () => {
      const p = await signedIn(ctx, req);
      if (!p) return toSignin(ctx, req, reply, '/signin/approvals');
      const rows = await pending(p);
      let body = '<h1>Access requests</h1>';
      const done = req.query.done;
      if (done === 'approve' || done === 'reject')
        body += `<p class="note" id="done">${done === 'approve' ? 'Approved.' : 'Rejected.'}</p>`;
      if (rows.length === 0) body += '<p id="empty">No requests are waiting for you.</p>';
      else {
        body +=
          '<table><thead><tr><th>Group</th><th>Person</th><th>Reason</th><th>Asked</th><th>Decision</th></tr></thead><tbody>';
        for (const { group, m, user } of rows) {
          const name = (user?.Name as Doc | undefined)?.FullName;
          const who = `${esc(user?.Email || m.UserID)}${name ? `<br>${esc(name)}` : ''}`;
          body += `<tr data-group="${esc(group.ID)}" data-user="${esc(m.UserID)}"><td>${esc(group.Name)}</td><td>${who}</td><td>${esc(m.Reason)}</td><td>${esc(m.RequestTime)}</td><td>
<form method="post" action="/signin/approvals"><input type="hidden" name="group" value="${esc(group.ID)}"><input type="hidden" name="user" value="${esc(m.UserID)}">
<input type="text" name="reason" maxlength="1024" placeholder="Reason (optional)" aria-label="Reason">
<button type="submit" name="action" value="approve">Approve</button><button type="submit" name="action" value="reject">Reject</button></form></td></tr>`;
        }
        body += '</tbody></table>';
      }
      return page(reply, 200, 'Access requests', body);
    }),
  );

  app.post('/signin/approvals', OPTIONAL, (req, reply) =>
    guarded(reply, async () => {
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
