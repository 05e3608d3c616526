import { hash, randomInt } from 'node:crypto';
import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType, READ, SCOPES, type Scope } from '../schema/type.js';

/** The scopes of a key created with an empty Scopes list. */
export const DEFAULT_KEY_SCOPES: readonly Scope[] = ['user'];

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A new key: "gv" and 54 base62 characters from the CSPRNG (about 321 bits). */
export function generateApiKey(): string {
  let s = 'gv';
  for (let i = 0; i < 54; i++) s += ALPHABET[randomInt(ALPHABET.length)];
  return s;
}

/**
 * Keys carry ~321 bits of entropy, so a fast hash is enough (a slow KDF protects guessable
 * secrets, not random ones) and lets us find a key by its hash in one index lookup. Every request
 * with a key hashes it (the key cache is by hash): the one-shot form costs half of createHash's.
 */
export const hashApiKey = (key: string) => hash('sha256', key, 'base64url');

export const APIKey: ObjectType = {
  kind: 'APIKey',
  // Other instances cache validated keys (src/auth/keycache.ts).
  cachedElsewhere: 'changes',
  path: 'apikeys',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { user: { list: 'own', get: 'own', delete: 'own' }, audit: READ },
  fieldRules: { Scopes: 'scopes held', UserID: 'own user' },
  ownerField: 'UserID',
  fields: {
    Name: f.string({ maxLength: 256 }),
    Scopes: f.strings({ enum: SCOPES, maxItems: 4, doc: 'Any of user, audit, sync, admin' }),
    UserID: f.string({
      maxLength: 64,
      ref: 'User',
      doc: "The user the key acts for; the caller's user when empty on create",
    }),
    ExpireTime: f.timestamp({ doc: 'The key stops working at this time (zero: never)' }),
    Prefix: f.string({ readOnly: true, doc: 'First characters of the key, to recognise it' }),
  },
  prepare(ctx) {
    const scopes = ctx.doc.Scopes as string[];
    if (scopes.length === 0) ctx.doc.Scopes = [...DEFAULT_KEY_SCOPES];
    if (ctx.isCreate) {
      if (ctx.doc.UserID === '' && ctx.actor) ctx.doc.UserID = ctx.actor.userId;
      const key = generateApiKey();
      ctx.secret.KeyHash = hashApiKey(key);
      ctx.doc.Prefix = key.slice(0, 8);
      ctx.response = { Secret: key };
    }
  },
  lookupKeys: (_doc, secret): Record<string, string> =>
    typeof secret.KeyHash === 'string' ? { KeyHash: secret.KeyHash } : {},
};
