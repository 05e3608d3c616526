import {
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { err, pathParams, type RouteSchema } from '../../../core/routeschema.js';
import { User } from '../../../objects/user.js';
import { enforce } from '../../../policy/decide.js';
import type { ServiceContext } from '../../../store/service.js';
import { requestSession } from '../../session/sessions.js';
import { jsonBody } from '../factor.js';
import { type CredentialChange, credentialChange, credentialChanged } from '../stepup.js';
import { storeChallenge, takeChallenge } from './challenge.js';
import {
  CHALLENGE_MS,
  credentialsOf,
  MAX_CREDENTIALS,
  publicView,
  relyingParty,
  type StoredCredential,
  userHandle,
} from './credentials.js';
import { proofName } from './signin.js';

/** Whose keys a request is about: one's own, or `?user=` for administrators (sessions or keys). */
async function targetUser(ctx: ServiceContext, req: FastifyRequest): Promise<string> {
  const p = req.principal;
  if (!p) throw new ApiError('Unauthenticated', 'authentication required');
  const named = (req.query as Record<string, unknown> | undefined)?.user;
  if (named === undefined || named === '' || named === p.userId) return p.userId;
  if (typeof named !== 'string')
    throw new ApiError('InvalidField', 'user may be given only once', { field: 'user' });
  await enforce(ctx, p, 'User.factors', { kind: 'User', id: named, userId: named });
  return named;
}

/** Registration needs the key in the holder's hands: only the user's own signed-in session. */
function ownSession(change: CredentialChange) {
  if (change.reset)
    throw new ApiError(
      'Forbidden',
      'a security key is registered by its holder, in their own signed-in session (an administrator may remove keys)',
    );
}

const cleanName = (v: unknown, n: number) => {
  const s =
    typeof v === 'string'
      ? v
          .replace(/[\p{Cc}\p{Cf}]/gu, '')
          .trim()
          .slice(0, 64)
      : '';
  return s || `Security key ${n}`;
};

/**
 * Enrolment of security keys and passkeys (JSON):
 * GET /auth/enroll/u2f lists them; POST /auth/enroll/u2f answers the creation options (a pending
 * challenge on the session); POST /auth/enroll/u2f/confirm {"Credential", "Name"} verifies the
 * browser's answer and stores the key; DELETE /auth/enroll/u2f/:id removes one. Setting and
 * removing go through the step-up rule (../stepup.ts).
 */
export function registerEnrolment(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/auth/enroll/u2f', { schema: GET_AUTH_ENROLL_U2F }, async (req, reply) => {
    const userId = await targetUser(ctx, req);
    if (!(await ctx.store.get(User, userId))) throw new ApiError('NotFound', `User ${userId} does not exist`);
    const list = credentialsOf(await ctx.store.getSecret(User, userId)).map(publicView);
    reply.header('Cache-Control', 'no-store');
    return reply.code(200).send({ Credentials: list });
  });

  app.post('/auth/enroll/u2f', { schema: POST_AUTH_ENROLL_U2F }, (req, reply) =>
    startRegistration(req, reply, ctx),
  );

  app.post('/auth/enroll/u2f/confirm', { schema: POST_AUTH_ENROLL_U2F_CONFIRM }, (req, reply) =>
    confirmRegistration(req, reply, ctx),
  );

  app.delete('/auth/enroll/u2f/:id', { schema: DELETE_AUTH_ENROLL_U2F_ID }, async (req, reply) => {
    const change = await credentialChange(req, ctx, 'u2f', 'remove');
    const id = (req.params as { id: string }).id;
    let found = false;
    await ctx.store.systemPut(User, change.userId, (doc, s) => {
      if (!doc) return null;
      const list = credentialsOf(s);
      found = list.some((c) => c.ID === id);
      return { doc, secret: { ...s, WebAuthnCredentials: list.filter((c) => c.ID !== id) } };
    });
    if (!found) throw new ApiError('NotFound', 'no such security key');
    await credentialChanged(req, reply, ctx, change, 'u2f');
    return reply.code(204).send();
  });
}

/** POST /auth/enroll/u2f: the creation options, with the challenge pending on the session. */
async function startRegistration(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const change = await credentialChange(req, ctx, 'u2f', 'set');
  ownSession(change);
  const rp = await relyingParty(ctx);
  const user = await ctx.store.get(User, change.userId);
  if (!user) throw new ApiError('NotFound', `User ${change.userId} does not exist`);
  const existing = credentialsOf(await ctx.store.getSecret(User, change.userId));
  if (existing.length >= MAX_CREDENTIALS)
    throw new ApiError('Conflict', `at most ${MAX_CREDENTIALS} security keys per user: remove one first`);
  const email = String(user.doc.Email || user.doc.UserName || user.id);
  const fullName = (user.doc.Name as { FullName?: unknown } | undefined)?.FullName;
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: email,
    userID: userHandle(user.id),
    userDisplayName: typeof fullName === 'string' && fullName !== '' ? fullName : email,
    timeout: CHALLENGE_MS,
    attestationType: 'none',
    excludeCredentials: existing.map((c) => ({ id: c.ID, transports: c.Transports })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' },
    extensions: { credProps: true },
  });
  const { session } = await requestSession(req, ctx);
  if (!session) throw new ApiError('Unauthenticated', 'authentication required');
  await storeChallenge(req, reply, ctx, session.id, {
    challenge: options.challenge,
    userId: change.userId,
    purpose: 'register',
  });
  reply.header('Cache-Control', 'no-store');
  return reply.code(200).type('application/json').send(JSON.stringify(options));
}

/** POST /auth/enroll/u2f/confirm: verifies the browser's answer to the pending challenge and stores the key. */
async function confirmRegistration(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const change = await credentialChange(req, ctx, 'u2f', 'set');
  ownSession(change);
  const body = jsonBody(req);
  const response = body.Credential as RegistrationResponseJSON | undefined;
  if (response === null || typeof response !== 'object' || typeof response.id !== 'string')
    throw new ApiError('InvalidField', "Credential must be the browser's PublicKeyCredential JSON", {
      field: 'Credential',
    });
  const { pending } = await takeChallenge(req, reply, ctx, {
    purpose: 'register',
    userId: change.userId,
    kind: 'Conflict',
    missing: 'no security-key registration is in progress: POST /auth/enroll/u2f first',
    spent: 'the registration was already answered: POST /auth/enroll/u2f again',
    expired: 'the registration has expired: POST /auth/enroll/u2f again',
  });
  const rp = await relyingParty(ctx);
  let info: NonNullable<Awaited<ReturnType<typeof verifyRegistrationResponse>>['registrationInfo']>;
  try {
    const v = await verifyRegistrationResponse({
      response,
      expectedChallenge: pending.Challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: false,
    });
    if (!v.verified) throw new Error('not verified');
    info = v.registrationInfo;
  } catch (e) {
    req.log.warn({ userId: change.userId, reason: (e as Error).message }, 'WebAuthn registration refused');
    throw new ApiError('BadRequest', "the security key's answer does not verify for this site", {
      field: 'Credential',
    });
  }
  const transports = Array.isArray(response.response?.transports)
    ? response.response.transports.filter((t): t is string => typeof t === 'string').slice(0, 8)
    : [];
  const now = new Date().toISOString();
  let stored: StoredCredential | undefined;
  await ctx.store.systemPut(User, change.userId, (doc, s) => {
    if (!doc) throw new ApiError('NotFound', `User ${change.userId} does not exist`);
    const list = credentialsOf(s);
    if (list.some((c) => c.ID === info.credential.id))
      throw new ApiError('Conflict', 'this security key is registered already');
    if (list.length >= MAX_CREDENTIALS)
      throw new ApiError('Conflict', `at most ${MAX_CREDENTIALS} security keys per user: remove one first`);
    stored = {
      ID: info.credential.id,
      PublicKey: Buffer.from(info.credential.publicKey).toString('base64url'),
      Counter: info.credential.counter,
      Transports: transports,
      UserVerified: info.userVerified,
      DeviceBound: info.credentialDeviceType === 'singleDevice',
      Discoverable: response.clientExtensionResults?.credProps?.rk === true,
      Name: cleanName(body.Name, list.length + 1),
      AAGUID: info.aaguid,
      CreateTime: now,
      LastUsed: '',
    };
    return { doc, secret: { ...s, WebAuthnCredentials: [...list, stored] } };
  });
  if (!stored) throw new ApiError('Internal', 'the key was not stored');
  await credentialChanged(
    req,
    reply,
    ctx,
    change,
    proofName(stored, stored.UserVerified, stored.DeviceBound),
  );
  return reply.code(200).send(publicView(stored));
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const GET_AUTH_ENROLL_U2F: RouteSchema = {
  tags: ['Sign-in: security keys and passkeys'],
  summary: "The caller's keys (administrators: ?user=)",
  response: {
    '200': {
      description: '{"Credentials": [...]}',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              Credentials: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    ID: { type: 'string' },
                    Name: { type: 'string' },
                    Passkey: { type: 'boolean' },
                    DeviceBound: { type: 'boolean' },
                    UserVerified: { type: 'boolean' },
                    CreateTime: { type: 'string', format: 'date-time' },
                    LastUsed: { type: 'string' },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
};

const POST_AUTH_ENROLL_U2F: RouteSchema = {
  tags: ['Sign-in: security keys and passkeys'],
  summary: 'Start registering a key (own signed-in session, step-up): the WebAuthn creation options',
  response: {
    '200': {
      description: 'PublicKeyCredentialCreationOptionsJSON',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '401': err('Step-up needed (intent)'),
    '403': err('API keys and administrators cannot register keys for someone'),
    '409': err('No relying party configured, or 20 keys already'),
  },
};

const POST_AUTH_ENROLL_U2F_CONFIRM: RouteSchema = {
  tags: ['Sign-in: security keys and passkeys'],
  summary: "Finish registering: the browser's PublicKeyCredential",
  body: {
    content: {
      'application/json': {
        schema: { type: 'object', properties: { Credential: { type: 'object' }, Name: { type: 'string' } } },
      },
    },
  },
  response: {
    '200': {
      description: 'The stored key',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              ID: { type: 'string' },
              Name: { type: 'string' },
              Passkey: { type: 'boolean' },
              DeviceBound: { type: 'boolean' },
              UserVerified: { type: 'boolean' },
              CreateTime: { type: 'string', format: 'date-time' },
              LastUsed: { type: 'string' },
            },
          },
        },
      },
    },
    '400': err('The answer does not verify for this site'),
    '401': err('Step-up needed (intent)'),
    '409': err('No registration pending, already answered or expired'),
  },
};

const DELETE_AUTH_ENROLL_U2F_ID: RouteSchema = {
  tags: ['Sign-in: security keys and passkeys'],
  summary: "Remove a key (step-up; an admin key's reset with ?user=)",
  params: pathParams('id'),
  response: { '204': { description: 'Removed' }, '401': err('Step-up needed'), '404': err('No such key') },
};
