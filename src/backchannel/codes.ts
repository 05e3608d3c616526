import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { ServiceContext } from '../store/service.js';

/** A one-time sign-in code lives this long (the browser is redirected at once). */
export const CODE_TTL_MS = 60_000;

interface CodesTable {
  code_hash: string;
  app_id: string;
  session_id: string;
  until: number;
}

const codesDb = (ctx: Pick<ServiceContext, 'db'>) =>
  ctx.db.kysely.withTables<{ proxy_signin_codes: CodesTable }>() as unknown as Kysely<{
    proxy_signin_codes: CodesTable;
  }>;

const sha256 = (s: string) => createHash('sha256').update(s).digest('base64url');

/**
 * Issues a one-time code that lets the proxy of `appId` learn which session signed in. Only its
 * SHA-256 is stored, in the database, so any service instance can redeem it.
 */
export async function issueCode(ctx: ServiceContext, appId: string, sessionId: string): Promise<string> {
  const now = Date.now();
  const db = codesDb(ctx);
  await db.deleteFrom('proxy_signin_codes').where('until', '<=', now).execute();
  const code = randomBytes(32).toString('base64url');
  await db
    .insertInto('proxy_signin_codes')
    .values({ code_hash: sha256(code), app_id: appId, session_id: sessionId, until: now + CODE_TTL_MS })
    .execute();
  return code;
}

/**
 * Redeems a code for the proxy of `appId`: the session ID, or undefined when the code is unknown,
 * expired, already used or issued to another App. Deleting and reading in one statement makes
 * it single-use even when two instances redeem it at once.
 */
export async function redeemCode(
  ctx: ServiceContext,
  appId: string,
  code: string,
): Promise<string | undefined> {
  const row = await codesDb(ctx)
    .deleteFrom('proxy_signin_codes')
    .where('code_hash', '=', sha256(code))
    .returning(['app_id', 'session_id', 'until'])
    .executeTakeFirst();
  if (!row || Number(row.until) <= Date.now() || row.app_id !== appId) return undefined;
  return row.session_id;
}
