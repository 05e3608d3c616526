import { randomInt } from 'node:crypto';
import { decryptSecret, encryptSecret } from '../auth/factors/secrets.js';
import { secretsKey } from '../auth/session/keys.js';
import { ApiError } from '../core/errors.js';
import { nowStamp } from '../groups/lifecycle.js';
import { Account } from '../objects/account.js';
import type { ServiceContext } from '../store/service.js';

/**
 * The initial-password policy (docs/directory.md): 20 characters drawn with the CSPRNG
 * (crypto.randomInt, no modulo bias) from 55 letters and digits that cannot be misread (no 0, O,
 * o, 1, l, I, i), about 115 bits; at least one lower-case letter, one upper-case letter and one
 * digit (drawn again until so: a target that demands each class accepts it).
 */
export const PASSWORD_LENGTH = 20;
const LOWER = 'abcdefghjkmnpqrstuvwxyz';
const UPPER = 'ABCDEFGHJKLMNPQRSTUVWXYZ';
const DIGITS = '23456789';
export const PASSWORD_ALPHABET = LOWER + UPPER + DIGITS;

export function generatePassword(): string {
  for (;;) {
    let s = '';
    for (let i = 0; i < PASSWORD_LENGTH; i++) s += PASSWORD_ALPHABET[randomInt(PASSWORD_ALPHABET.length)];
    if (/[a-z]/.test(s) && /[A-Z]/.test(s) && /[0-9]/.test(s)) return s;
  }
}

/**
 * Initial passwords are kept encrypted (AES-256-GCM with the service's secrets key, the same
 * one that protects TOTP secrets: src/auth/session/keys.ts), bound to the object holding them
 * (the AccountChange until applied, then the Account), so a box copied to another object fails.
 */
export const sealPassword = (ctx: Pick<ServiceContext, 'db'>, plain: string, holder: string) =>
  encryptSecret(ctx, plain, `initial-password:${holder}`);

export const openPassword = (ctx: Pick<ServiceContext, 'db'>, box: string, holder: string) =>
  decryptSecret(ctx, box, `initial-password:${holder}`);

/**
 * Loads the secrets key before a write transaction that seals or opens a password inside it: on
 * SQLite the transaction holds the one connection, so a first load from inside it would wait forever.
 */
export const readyPasswordKey = async (ctx: Pick<ServiceContext, 'db'>) => {
  await secretsKey(ctx);
};

/**
 * Hands out an account's initial password once, to the account's user or an administrator
 * (the route checked which): in one transaction, so of two concurrent fetches exactly one gets it.
 */
export async function fetchInitialPassword(
  ctx: ServiceContext,
  accountId: string,
  by: string,
): Promise<string> {
  let password: string | undefined;
  await readyPasswordKey(ctx);
  await ctx.store.systemPut(Account, accountId, async (doc, secret) => {
    if (!doc || typeof secret.InitialPassword !== 'string') return doc ? { doc } : null;
    password = await openPassword(ctx, secret.InitialPassword, accountId);
    const { InitialPassword: _gone, ...rest } = secret;
    return {
      doc: { ...doc, HaveInitialPassword: false, PasswordFetchTime: nowStamp(), PasswordFetchedBy: by },
      secret: rest,
    };
  });
  if (password === undefined)
    throw new ApiError(
      'NotFound',
      'this account has no initial password (it was fetched already, or never set)',
    );
  return password;
}
