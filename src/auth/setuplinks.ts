import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';
import { User } from '../objects/user.js';
import type { ServiceContext } from '../store/service.js';
import { userUsable } from './apikeys.js';
import { proven } from './factors/factor.js';
import { passwordProblem } from './factors/password/index.js';
import { hashSecret } from './factors/secrets.js';
import { tenantDoc } from './integrity.js';
import { authDb } from './session/db.js';
import { deleteUserSessions, hashToken, newToken, replaceSession } from './session/sessions.js';

/**
 * One-time sign-in URLs for an administrator without a password yet (the first start with
 * `bootstrap.email`) or locked out (`gatehouse recover`): whoever opens the URL chooses the
 * administrator's password and is signed in with it. Possession of the URL is the whole proof,
 * like an API key printed on the console, so it is single use, short-lived (at most an hour),
 * stored only as a hash, and a new one for the same user voids the older ones.
 *
 * Kept in the auth_keys table (a row named `setup-link:<sha256 of the token>`), which every
 * instance shares, so no migration is needed.
 */
const PREFIX = 'setup-link:';

interface LinkRecord {
  UserID: string;
  /** Milliseconds since the epoch. */
  Expires: number;
}

type Ctx = Pick<ServiceContext, 'db'>;

const parse = (value: string): LinkRecord | undefined => {
  try {
    const v = JSON.parse(value) as Partial<LinkRecord>;
    return typeof v.UserID === 'string' && typeof v.Expires === 'number'
      ? { UserID: v.UserID, Expires: v.Expires }
      : undefined;
  } catch {
    return undefined;
  }
};

/** Creates a link for the user, voiding their earlier ones and every expired one; returns its token. */
export async function createSetupLink(ctx: Ctx, userId: string, ttlSeconds: number): Promise<string> {
  const db = authDb(ctx);
  const now = Date.now();
  const rows = await db
    .selectFrom('auth_keys')
    .select(['name', 'value'])
    .where('name', 'like', `${PREFIX}%`)
    .execute();
  const stale = rows
    .filter((r) => {
      const rec = parse(r.value);
      return !rec || rec.UserID === userId || rec.Expires <= now;
    })
    .map((r) => r.name);
  if (stale.length > 0) await db.deleteFrom('auth_keys').where('name', 'in', stale).execute();
  const token = newToken();
  const record: LinkRecord = { UserID: userId, Expires: now + ttlSeconds * 1000 };
  await db
    .insertInto('auth_keys')
    .values({ name: `${PREFIX}${hashToken(token)}`, value: JSON.stringify(record), create_time: now })
    .execute();
  return token;
}

const wellFormed = (token: string) => /^[A-Za-z0-9_-]{43}$/.test(token);

/** The user a link is good for now, without using it up (the page a GET shows); undefined if none. */
export async function setupLinkUser(ctx: Ctx, token: string): Promise<string | undefined> {
  if (!wellFormed(token)) return undefined;
  const row = await authDb(ctx)
    .selectFrom('auth_keys')
    .select('value')
    .where('name', '=', `${PREFIX}${hashToken(token)}`)
    .executeTakeFirst();
  const rec = row && parse(row.value);
  return rec && rec.Expires > Date.now() ? rec.UserID : undefined;
}

/**
 * Uses the link up: the row is deleted, and only the request whose DELETE removed it goes on, so
 * two requests racing with one link cannot both succeed. Returns the user, or undefined.
 */
async function redeem(ctx: Ctx, token: string): Promise<string | undefined> {
  if (!wellFormed(token)) return undefined;
  const deleted = await authDb(ctx)
    .deleteFrom('auth_keys')
    .where('name', '=', `${PREFIX}${hashToken(token)}`)
    .returning('value')
    .executeTakeFirst();
  const rec = deleted && parse(deleted.value);
  return rec && rec.Expires > Date.now() ? rec.UserID : undefined;
}

export const linkGone = () =>
  new ApiError(
    'LinkExpired',
    'this sign-in link was used already or has expired; an operator can print a new one with gatehouse recover',
  );

/**
 * Completes a link: checks the new password against the tenant's rule (before using the link up,
 * so a short password does not cost it), uses the link, sets the password, ends the user's other
 * sessions (whoever held them may be why the administrator recovers) and signs this browser in
 * with a fresh session that has proven the password.
 */
export async function completeSetupLink(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  token: string,
  password: string,
): Promise<string> {
  const bad = passwordProblem(password, await tenantDoc(ctx));
  if (bad) throw new ApiError('InvalidField', `the password ${bad}`, { field: 'password' });
  const hash = await hashSecret(password);
  const userId = await redeem(ctx, token);
  if (!userId) throw linkGone();
  const user = await ctx.store.get(User, userId);
  if (!user || !userUsable(user.doc)) throw new ApiError('Forbidden', 'this user may not sign in');
  await ctx.store.systemPut(User, userId, (doc, secret) =>
    doc ? { doc: { ...doc, HavePassword: true }, secret: { ...secret, PasswordHash: hash } } : null,
  );
  await deleteUserSessions(ctx, userId);
  const session = await replaceSession(req, reply, ctx, userId);
  await proven(req, reply, ctx, session, 'password');
  return userId;
}
