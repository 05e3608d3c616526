import { randomInt } from 'node:crypto';
import { verify } from '@node-rs/argon2';
import { User } from '../../../objects/user.js';
import {
  attemptOf,
  type Factor,
  FLOW,
  field,
  formIntent,
  formOf,
  identified,
  proven,
  regulated,
} from '../factor.js';
import { hashSecret } from '../secrets.js';
import { enrollment, jsonObject, signInStep } from '../stepschemas.js';
import { credentialChange, credentialChanged } from '../stepup.js';

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
  const results = await Promise.all(hashes.map((h) => verify(h, code).catch(() => false)));
  return hashes[results.indexOf(true)];
}

/**
 * POST /auth/backup (form code): a single-use backup code. POST /auth/enroll/backup generates a
 * new set (the old set stops working) and returns it once; DELETE /auth/enroll/backup removes them.
 */
export const backupFactor: Factor = {
  name: 'backup',
  kind: 'possession',
  enrolled: (_user, secret) => Array.isArray(secret.BackupHashes) && secret.BackupHashes.length > 0,
  register(app, ctx) {
    app.post('/auth/backup', { ...FLOW, schema: BACKUP_STEP }, async (req, reply) => {
      const form = formOf(req);
      const code = normalize(field(form, 'code', { required: true, max: 64 }));
      const who = await identified(req, reply, ctx, form);
      await formIntent(ctx, form, who.session);
      await regulated(req, ctx, attemptOf(who), 'backup', 'backup code', async () => {
        const hashes = Array.isArray(who.secret.BackupHashes) ? (who.secret.BackupHashes as string[]) : [];
        const hit = await matching(hashes, code);
        if (!hit) return false;
        // Spend it inside the write: of two parallel uses of one code, only one finds it still there.
        let spent = false;
        await ctx.store.systemPut(User, who.user.id, (doc, s) => {
          if (!doc) return null;
          const list = Array.isArray(s.BackupHashes) ? (s.BackupHashes as string[]) : [];
          spent = list.includes(hit);
          return { doc, secret: { ...s, BackupHashes: list.filter((h) => h !== hit) } };
        });
        return spent;
      });
      await proven(req, reply, ctx, who.session, 'backup');
      return reply.code(204).send();
    });

    app.post('/auth/enroll/backup', { schema: BACKUP_GENERATE }, async (req, reply) => {
      // An administrator may generate a user's codes (?user=) to hand them over.
      const change = await credentialChange(req, ctx, 'backup', 'set');
      const { userId } = change;
      const codes = Array.from({ length: BACKUP_CODE_COUNT }, newCode);
      const hashes = await Promise.all(codes.map((c) => hashSecret(normalize(c))));
      await ctx.store.systemPut(User, userId, (doc, s) =>
        doc ? { doc, secret: { ...s, BackupHashes: hashes } } : null,
      );
      await credentialChanged(req, reply, ctx, change, 'backup');
      reply.header('Cache-Control', 'no-store');
      return reply
        .code(200)
        .type('application/json')
        .send(JSON.stringify({ Codes: codes }));
    });

    app.delete('/auth/enroll/backup', { schema: BACKUP_REMOVE }, async (req, reply) => {
      const change = await credentialChange(req, ctx, 'backup', 'remove');
      const { userId } = change;
      await ctx.store.systemPut(User, userId, (doc, s) => {
        if (!doc) return null;
        const { BackupHashes: _, ...rest } = s;
        return { doc, secret: rest };
      });
      await credentialChanged(req, reply, ctx, change, 'backup');
      return reply.code(204).send();
    });
  },
};

const TAG = 'Sign-in: backup codes';
const BACKUP_STEP = signInStep(
  TAG,
  'Prove a backup code (each code once)',
  { code: { type: 'string', maxLength: 64 } },
  ['code'],
);
const BACKUP_GENERATE = enrollment(TAG, 'New backup codes, replacing the old ones (shown once)', {
  answer: jsonObject('The codes', { Codes: { type: 'array', items: { type: 'string' } } }),
});
const BACKUP_REMOVE = enrollment(TAG, 'Remove the backup codes');
