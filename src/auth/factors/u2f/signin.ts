import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  verifyAuthenticationResponse,
} from '@simplewebauthn/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { err, type RouteSchema } from '../../../core/routeschema.js';
import { User } from '../../../objects/user.js';
import type { ServiceContext } from '../../../store/service.js';
import { userUsable } from '../../apikeys.js';
import { LEVEL_NAMES } from '../../integrity.js';
import { ensureSession, replaceSession, type Session, updateRequestSession } from '../../session/sessions.js';
import { addressKey, attemptSucceeded, chargeAttempt, factorKey } from '../../throttle.js';
import { trustedTag } from '../devices.js';
import { FLOW, field, formIntent, formOf, identifyByEmail, jsonBody, proven } from '../factor.js';
import { storeChallenge, takeChallenge } from './challenge.js';
import {
  CHALLENGE_MS,
  credentialsOf,
  relyingParty,
  type StoredCredential,
  userOfHandle,
} from './credentials.js';

/** The throttle counter all three proofs of a key share (one factor, one counter). */
export const THROTTLE_NAME = 'u2f';

const refused = () => new ApiError('IncorrectCredential', 'the security key or passkey was not accepted');

/** What an assertion proved, as the name recorded on the session (kinds: ./index.ts). */
export function proofName(c: StoredCredential, userVerified: boolean, deviceBound: boolean): string {
  if (userVerified && deviceBound && c.DeviceBound) return 'u2f';
  return userVerified ? 'u2f_uv' : 'u2f_up';
}

/** The assertion as the browser sent it; only the shape is checked here, the library checks the rest. */
function assertionOf(body: Record<string, unknown>): AuthenticationResponseJSON {
  const r = body.response as Record<string, unknown> | undefined;
  const str = (v: unknown, max: number) => typeof v === 'string' && v.length > 0 && v.length <= max;
  if (
    !str(body.id, 1024) ||
    body.type !== 'public-key' ||
    r === null ||
    typeof r !== 'object' ||
    !str(r.clientDataJSON, 8192) ||
    !str(r.authenticatorData, 8192) ||
    !str(r.signature, 2048) ||
    (r.userHandle !== undefined && r.userHandle !== null && !str(r.userHandle, 128))
  )
    throw new ApiError('BadRequest', 'the body must be a WebAuthn assertion (PublicKeyCredential JSON)');
  return {
    id: String(body.id),
    rawId: String(body.id),
    type: 'public-key',
    response: {
      clientDataJSON: String(r.clientDataJSON),
      authenticatorData: String(r.authenticatorData),
      signature: String(r.signature),
      ...(typeof r.userHandle === 'string' ? { userHandle: r.userHandle } : {}),
    },
    clientExtensionResults: {},
  };
}

/** The session of the user the key belongs to: a passkey may name another user than the session's. */
async function sessionFor(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  s: Session,
  userId: string,
): Promise<Session> {
  if (s.userId === userId) return s;
  if (s.userId === '') return updateRequestSession(req, reply, ctx, { ...s, userId, factors: [] });
  return replaceSession(req, reply, ctx, userId);
}

/**
 * POST /auth/u2f/start and /auth/u2f/finish: sign-in with a security key or passkey. With a user
 * named (the e-mail step, or `email` in the form) the options list that user's keys; without, they
 * list none and the browser offers its passkeys (discoverable credentials): passwordless sign-in,
 * also from the autofill of the e-mail field (conditional mediation).
 */
export function registerSignin(app: FastifyInstance, ctx: ServiceContext) {
  app.post('/auth/u2f/start', { ...FLOW, schema: POST_AUTH_U2F_START }, (req, reply) =>
    startSignin(req, reply, ctx),
  );

  app.post('/auth/u2f/finish', { ...FLOW, schema: POST_AUTH_U2F_FINISH }, (req, reply) =>
    finishSignin(req, reply, ctx),
  );
}

/** POST /auth/u2f/start: the request options, with the challenge pending on the session. */
async function startSignin(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const form = formOf(req);
  const rp = await relyingParty(ctx);
  const email = field(form, 'email', { max: 254 });
  const session = email
    ? await identifyByEmail(req, reply, ctx, email)
    : await ensureSession(req, reply, ctx);
  await formIntent(ctx, form, session);
  let allow: StoredCredential[] = [];
  if (session.userId !== '') {
    allow = credentialsOf(await ctx.store.getSecret(User, session.userId));
    if (allow.length === 0)
      throw new ApiError('BadRequest', 'this user has no security key or passkey', { field: 'email' });
  }
  const options = await generateAuthenticationOptions({
    rpID: rp.id,
    allowCredentials: allow.map((c) => ({ id: c.ID, transports: c.Transports })),
    userVerification: 'preferred',
    timeout: CHALLENGE_MS,
  });
  await storeChallenge(req, reply, ctx, session.id, {
    challenge: options.challenge,
    userId: session.userId,
    purpose: 'signin',
  });
  reply.header('Cache-Control', 'no-store');
  return reply.code(200).type('application/json').send(JSON.stringify(options));
}

/** POST /auth/u2f/finish: checks the browser's assertion against the pending challenge and the user's key, then records the proof. */
async function finishSignin(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const body = jsonBody(req);
  const assertion = assertionOf(body);
  const { session, pending } = await takeChallenge(req, reply, ctx, {
    purpose: 'signin',
    kind: 'BadRequest',
    missing: 'no security-key challenge is pending: POST /auth/u2f/start first',
    spent: 'the challenge was already answered: POST /auth/u2f/start again',
    expired: 'the challenge has expired: POST /auth/u2f/start again',
  });
  if (body.intent !== undefined) {
    if (typeof body.intent !== 'string')
      throw new ApiError('InvalidField', 'intent must be a string', { field: 'intent' });
    await formIntent(ctx, { intent: body.intent }, session);
  }
  const handle = assertion.response.userHandle;
  const handleUser = handle ? userOfHandle(handle) : '';
  const userId = pending.UserID || handleUser;
  const address = addressKey(req.ip);
  let user = userId !== '' ? await ctx.store.get(User, userId) : undefined;
  // A passkey registered before a user merge still carries the merged-away user's handle; the
  // merge moved the key to the target (src/directory/merge.ts), so follow MergedInto there. The
  // key is still looked up among that user's own keys below: the handle only names whom to ask.
  for (let hop = 0; hop < 4 && !pending.UserID && typeof user?.doc.MergedInto === 'string'; hop++)
    user = user.doc.MergedInto === '' ? user : await ctx.store.get(User, user.doc.MergedInto);
  // With a user named, only that user's keys count (the handle is a hint: a key moved by a user
  // merge still carries the merged-away user's handle); without one, the handle names the user.
  // No such user: counted against the address only (there is no user to count it against).
  if (!user) {
    await chargeAttempt(ctx, [address]);
    throw refused();
  }
  if (!userUsable(user.doc)) throw new ApiError('Forbidden', 'this user may not sign in');
  const secret = await ctx.store.getSecret(User, user.id);
  const counter = factorKey(user.id, THROTTLE_NAME, await trustedTag(ctx, user.id, session.deviceId));
  await chargeAttempt(ctx, [address, counter]);
  const cred = credentialsOf(secret).find((c) => c.ID === assertion.id);
  if (!cred) throw refused();
  const rp = await relyingParty(ctx);
  let info: Awaited<ReturnType<typeof verifyAuthenticationResponse>>['authenticationInfo'];
  try {
    const v = await verifyAuthenticationResponse({
      response: assertion,
      expectedChallenge: pending.Challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      credential: {
        id: cred.ID,
        publicKey: new Uint8Array(Buffer.from(cred.PublicKey, 'base64url')),
        counter: cred.Counter,
        transports: cred.Transports,
      },
      // The level decides what user verification is worth; a key without it still proves possession.
      requireUserVerification: false,
    });
    if (!v.verified) throw new Error('the signature does not verify');
    info = v.authenticationInfo;
  } catch (e) {
    // The library's reason (wrong origin, counter gone backwards, bad signature) names no secret.
    req.log.warn(
      { userId: user.id, credential: cred.ID, reason: (e as Error).message },
      'WebAuthn assertion refused',
    );
    throw refused();
  }
  // The counter moves forward under the user's row lock: two answers with one counter value
  // (a cloned key racing its original) cannot both pass.
  let cloned = false;
  await ctx.store.systemPut(User, user.id, (doc, s) => {
    if (!doc) return null;
    const list = credentialsOf(s).map((c) => {
      if (c.ID !== cred.ID) return c;
      if ((info.newCounter > 0 || c.Counter > 0) && info.newCounter <= c.Counter) cloned = true;
      return cloned ? c : { ...c, Counter: info.newCounter, LastUsed: new Date().toISOString() };
    });
    return { doc, secret: { ...s, WebAuthnCredentials: list } };
  });
  if (cloned) {
    req.log.warn({ userId: user.id, credential: cred.ID }, 'WebAuthn signature counter did not increase');
    throw refused();
  }
  await attemptSucceeded(ctx, counter, address);
  const name = proofName(cred, info.userVerified, info.credentialDeviceType === 'singleDevice');
  const mine = await sessionFor(req, reply, ctx, session, user.id);
  const after = await proven(req, reply, ctx, mine, name);
  return reply.code(200).send({
    UserID: after.userId,
    Factor: name,
    IntegrityLevel: after.level,
    IntegrityLevelName: LEVEL_NAMES[after.level],
    Proven: after.factors,
  });
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const POST_AUTH_U2F_START: RouteSchema = {
  tags: ['Sign-in: security keys and passkeys'],
  summary: 'Start a sign-in with a security key or passkey: the WebAuthn request options',
  security: [],
  body: {
    content: {
      'application/x-www-form-urlencoded': {
        schema: { type: 'object', properties: { intent: { type: 'string' }, email: { type: 'string' } } },
      },
    },
  },
  response: {
    '200': {
      description:
        'PublicKeyCredentialRequestOptionsJSON (challenge, rpId, allowCredentials: empty for passkeys)',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    '400': err('The named user has no key, or a bad intent'),
    '409': err('No sign-in URL configured: there is no relying party'),
    '429': err('Too many e-mail lookups'),
  },
};

const POST_AUTH_U2F_FINISH: RouteSchema = {
  tags: ['Sign-in: security keys and passkeys'],
  summary: 'Answer the challenge: the session proves the key (u2f, u2f_uv or u2f_up)',
  security: [],
  body: {
    content: {
      'application/json': {
        schema: {
          type: 'object',
          description:
            'The PublicKeyCredential from navigator.credentials.get() as WebAuthn JSON (base64url byte strings), plus an optional "intent"',
          required: ['id', 'type', 'response'],
          properties: {
            id: { type: 'string' },
            type: { const: 'public-key' },
            response: {
              type: 'object',
              properties: {
                clientDataJSON: { type: 'string' },
                authenticatorData: { type: 'string' },
                signature: { type: 'string' },
                userHandle: { type: 'string' },
              },
            },
            intent: { type: 'string' },
          },
        },
      },
    },
  },
  response: {
    '200': {
      description: 'The session after the proof',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              UserID: { type: 'string' },
              Factor: { type: 'string', enum: ['u2f', 'u2f_uv', 'u2f_up'] },
              IntegrityLevel: { type: 'integer' },
              IntegrityLevelName: { type: 'string' },
              Proven: { type: 'array', items: { type: 'string' } },
            },
          },
        },
      },
    },
    '400': err('No challenge pending, already answered or expired; malformed assertion'),
    '403': err('Not accepted: unknown key, bad signature, wrong origin or RP ID, counter not increasing'),
    '429': err('Too many failures (X-Next-Attempt)'),
  },
};
