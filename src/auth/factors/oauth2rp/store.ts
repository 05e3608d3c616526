import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { newId } from '../../../store/objects.js';
import type { ServiceContext } from '../../../store/service.js';
import { decryptSecret, encryptSecret } from '../secrets.js';

/**
 * The tables of migration 0008_federated_links: federated links (a user's identities at upstream
 * providers, by issuer and subject) and the relying-party flows under way.
 */
export interface FederatedLinksTable {
  id: string;
  /** The ID token's `iss` (OpenID Connect) or the App's UserInfoURL (plain OAuth 2.0). */
  issuer: string;
  /** The provider's stable user ID: `sub`, or the mapped claim (GitHub: `id`). */
  subject: string;
  user_id: string;
  /** The App through which the link was made (several Apps may name one provider). */
  app_id: string;
  /** The address the provider gave when the link was made (shown to the user; never a key). */
  email: string;
  create_time: number;
  last_used: number;
}

export interface FlowsTable {
  /** SHA-256 of the `state` value: the state itself is only in the browser's URL. */
  state_hash: string;
  app_id: string;
  /** The session that started the flow: only it may finish it (login CSRF). */
  session_id: string;
  /** The user asking to link this provider to their account, '' for a sign-in. */
  link_user: string;
  /** FlowData, AES-256-GCM encrypted with the server key (it holds the PKCE verifier). */
  data: string;
  until: number;
}

export interface FlowData {
  nonce: string;
  verifier: string;
  redirectUri: string;
  next: string;
  /** The signed intent the flow was started with ('' without one): the sign-in page aims at its level. */
  intent?: string;
}

type Tables = { federated_links: FederatedLinksTable; oauth2rp_flows: FlowsTable };
type Ctx = Pick<ServiceContext, 'db'>;
const db = (ctx: Ctx) => ctx.db.kysely.withTables<Tables>() as unknown as Kysely<Tables>;

/** A flow lives this long: the person signs in at the provider meanwhile. */
export const FLOW_TTL_MS = 10 * 60_000;
/** Flows one session may have open; starting another drops the oldest. */
export const MAX_FLOWS_PER_SESSION = 5;

const stateHash = (state: string) => createHash('sha256').update(state).digest('base64url');

export async function saveFlow(
  ctx: Ctx,
  state: string,
  row: { appId: string; sessionId: string; linkUser: string },
  data: FlowData,
): Promise<void> {
  const now = Date.now();
  const hash = stateHash(state);
  // Flows nobody finished are removed as new ones start; one session keeps a few at most.
  await db(ctx).deleteFrom('oauth2rp_flows').where('until', '<=', now).execute();
  const open = await db(ctx)
    .selectFrom('oauth2rp_flows')
    .select(['state_hash'])
    .where('session_id', '=', row.sessionId)
    .orderBy('until', 'desc')
    .execute();
  const excess = open.slice(MAX_FLOWS_PER_SESSION - 1).map((r) => r.state_hash);
  if (excess.length) await db(ctx).deleteFrom('oauth2rp_flows').where('state_hash', 'in', excess).execute();
  await db(ctx)
    .insertInto('oauth2rp_flows')
    .values({
      state_hash: hash,
      app_id: row.appId,
      session_id: row.sessionId,
      link_user: row.linkUser,
      data: await encryptSecret(ctx, JSON.stringify(data), `oauth2rp:${hash}`),
      until: now + FLOW_TTL_MS,
    })
    .execute();
}

export interface Flow {
  appId: string;
  sessionId: string;
  linkUser: string;
  data: FlowData;
}

/**
 * Takes the flow a `state` names, once: it is deleted in the same step, so a second callback with
 * the same state (a replayed or injected response) finds nothing. Expired flows are not returned.
 */
export async function takeFlow(ctx: Ctx, state: string): Promise<Flow | undefined> {
  const hash = stateHash(state);
  const row = await db(ctx)
    .deleteFrom('oauth2rp_flows')
    .where('state_hash', '=', hash)
    .returningAll()
    .executeTakeFirst();
  if (!row || Number(row.until) <= Date.now()) return undefined;
  const data = JSON.parse(await decryptSecret(ctx, row.data, `oauth2rp:${hash}`)) as FlowData;
  return { appId: row.app_id, sessionId: row.session_id, linkUser: row.link_user, data };
}

export async function findLink(ctx: Ctx, issuer: string, subject: string) {
  return db(ctx)
    .selectFrom('federated_links')
    .selectAll()
    .where('issuer', '=', issuer)
    .where('subject', '=', subject)
    .executeTakeFirst();
}

/**
 * Links an identity to a user. The pair (issuer, subject) is unique: when two requests race, one
 * insert wins and the other reads the winner (the caller then compares users).
 */
export async function addLink(
  ctx: Ctx,
  l: { issuer: string; subject: string; userId: string; appId: string; email: string },
): Promise<FederatedLinksTable> {
  const now = Date.now();
  await db(ctx)
    .insertInto('federated_links')
    .values({
      id: newId(),
      issuer: l.issuer,
      subject: l.subject,
      user_id: l.userId,
      app_id: l.appId,
      email: l.email,
      create_time: now,
      last_used: now,
    })
    .onConflict((oc) => oc.columns(['issuer', 'subject']).doNothing())
    .execute();
  const row = await findLink(ctx, l.issuer, l.subject);
  if (!row) throw new Error('federated link could not be stored');
  return row;
}

/** A merge (src/directory/merge.ts): every identity linked to `fromId` now signs in as `toId`. */
export async function moveLinks(ctx: Ctx, fromId: string, toId: string): Promise<void> {
  await db(ctx).updateTable('federated_links').set({ user_id: toId }).where('user_id', '=', fromId).execute();
}

/**
 * Lets go of a link to a user who no longer exists, so the identity can be linked again. Only
 * that row, and only while it still names that user: a concurrent relink is left alone.
 */
export async function releaseLink(ctx: Ctx, link: { id: string; user_id: string }): Promise<void> {
  await db(ctx)
    .deleteFrom('federated_links')
    .where('id', '=', link.id)
    .where('user_id', '=', link.user_id)
    .execute();
}

/** Up to `limit` distinct user IDs that links name, in order, after `after` (the link sweep's pages). */
export async function linkedUserIds(ctx: Ctx, after: string, limit: number): Promise<string[]> {
  const rows = await db(ctx)
    .selectFrom('federated_links')
    .select('user_id')
    .distinct()
    .where('user_id', '>', after)
    .orderBy('user_id')
    .limit(limit)
    .execute();
  return rows.map((r) => r.user_id);
}

/** Deletes every link naming `userId` (a user who no longer exists); the number deleted. */
export async function releaseLinksOf(ctx: Ctx, userId: string): Promise<number> {
  const r = await db(ctx).deleteFrom('federated_links').where('user_id', '=', userId).executeTakeFirst();
  return Number(r.numDeletedRows);
}

export async function touchLink(ctx: Ctx, id: string): Promise<void> {
  await db(ctx).updateTable('federated_links').set({ last_used: Date.now() }).where('id', '=', id).execute();
}

export async function userLinks(ctx: Ctx, userId: string) {
  return db(ctx)
    .selectFrom('federated_links')
    .selectAll()
    .where('user_id', '=', userId)
    .orderBy('create_time')
    .execute();
}

export async function deleteLink(ctx: Ctx, id: string, userId: string): Promise<boolean> {
  const r = await db(ctx)
    .deleteFrom('federated_links')
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}
