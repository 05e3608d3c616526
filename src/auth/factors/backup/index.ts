import { randomInt } from 'node:crypto';
import { argon2Verify } from '../../../core/hashing.js';
import { User } from '../../../objects/user.js';
import type { ServiceContext } from '../../../store/service.js';
import type { Factor, Identified } from '../factor.js';
import { hashSecret } from '../secrets.js';
export const BACKUP_CODE_COUNT = 10;
/** No 0/O, 1/I/L: codes are read off paper. 10 characters of 31: about 50 bits each. */
const ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const normalize = (c: string) => c.toLowerCase().replace(/[\s-]+/g, '');

function newCode(): string {
  let s = '';
  for (let i = 0; i < 10; i++) s += ALPHABET[randomInt(ALPHABET.length)];
  return `${s.slice(0, 5)}-${s.slice(5)}`;
}

/** Which stored hash (if any) a code matches; every hash is tried, so timing does not tell which. */
async function matching(hashes: string[], code: string): Promise<string | undefined> {
  const results = await Promise.all(hashes.map((h) => argon2Verify(h, code).catch(() => false)));
  return hashes[results.indexOf(true)];
}

/** Spends the code, if it is one of the user's: of two parallel uses of one code, one succeeds. */
async function spend(ctx: ServiceContext, who: Identified, code: string): Promise<boolean> {
  const hashes = Array.isArray(who.secret.BackupHashes) ? (who.secret.BackupHashes as string[]) : [];
  const hit = await matching(hashes, normalize(code));
  if (!hit) return false;
  // Spent inside the write: only one of two parallel uses finds it still there.
  let spent = false;
  await ctx.store.systemPut(User, who.user.id, (doc, s) => {
    if (!doc) return null;
    const list = Array.isArray(s.BackupHashes) ? (s.BackupHashes as string[]) : [];
    spent = list.includes(hit);
    return { doc, secret: { ...s, BackupHashes: list.filter((h) => h !== hit) } };
  });
  return spent;
}

/**
 * POST /auth/backup (form code): a single-use backup code. POST /auth/enroll/backup generates a
 * new set (the old set stops working) and returns it once; DELETE /auth/enroll/backup removes them.
 */
export const backupFactor: Factor = {
  name: 'backup',
  kind: 'possession',
  tag: 'Sign-in: backup codes',
  enrolled: (_user, secret) => Array.isArray(secret.BackupHashes) && secret.BackupHashes.length > 0,
  words: { label: 'a backup code', proof: 'a backup code' },
  form: { rank: 60, submit: 'Use backup code', hint: 'Each backup code works once.' },
  settings: {
    title: 'Backup codes',
    rank: 50,
    intro:
      'Ten single-use codes for when your other methods are not at hand. Generating new ones voids the old ones.',
    client: 'backup',
  },
  prove: {
    summary: 'Prove a backup code (each code once)',
    what: 'backup code',
    fields: [{ name: 'code', label: 'Backup code', input: 'text', maxLength: 64, autocomplete: 'off' }],
    check: (ctx, who, values) => spend(ctx, who, values.code ?? ''),
  },
  enroll: [
    {
      // An administrator may generate a user's codes (?user=) to hand them over.
      method: 'POST',
      op: 'set',
      summary: 'New backup codes, replacing the old ones (shown once)',
      answer: { Codes: { type: 'array', items: { type: 'string' } } },
      async write(ctx, { userId }) {
        const codes = Array.from({ length: BACKUP_CODE_COUNT }, newCode);
        const hashes = await Promise.all(codes.map((c) => hashSecret(normalize(c))));
        await ctx.store.systemPut(User, userId, (doc, s) =>
          doc ? { doc, secret: { ...s, BackupHashes: hashes } } : null,
        );
        return { Codes: codes };
      },
    },
    {
      method: 'DELETE',
      op: 'remove',
      summary: 'Remove the backup codes',
      async write(ctx, { userId }) {
        await ctx.store.systemPut(User, userId, (doc, s) => {
          if (!doc) return null;
          const { BackupHashes: _, ...rest } = s;
          return { doc, secret: rest };
        });
        return undefined;
      },
    },
  ],
};
