import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { err, type Json, jsonObject, type RouteSchema, USER_QUERY } from '../../core/routeschema.js';
import type { ServiceContext } from '../../store/service.js';
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
} from './factor.js';
import type { EnrollStep, ProveStep } from './steps.js';
import { credentialChange, credentialChanged } from './stepup.js';

/**
 * The one sign-in flow (docs/architecture.md, "How to add a sign-in factor"). A factor declares
 * what it proves and how it is set up, as data and small functions (./factor.ts: `prove`,
 * `enroll`, `form`); this module owns the HTTP around them, the same for every factor:
 *
 * - a sign-in step, POST /auth/<name>: the fields (validated by the route schema, which also
 *   documents them), the user being signed in (or named by `email`), the signed intent bound to
 *   this session, brute-force regulation (charged before the check, cleared only for this factor
 *   on success), then the one sign-in completion and the session's new level;
 * - enrolment steps, /auth/enroll/<name>[/<step>]: the one credential-change rule (step-up, an
 *   administrator's reset with ?user=, an invitation's first factors), the change, then the
 *   change's consequences (other sessions end, an invited factor counts as proven);
 * - CSRF: every route here changes state under /auth, so the authenticator's check (checkCsrf in
 *   src/auth/session/authenticator.ts: this origin, or X-Requested-With) runs before it.
 */

/** Registers a factor's routes: its declared steps through the flow, then any of its own. */
export async function mountFactor(app: FastifyInstance, ctx: ServiceContext, factor: Factor): Promise<void> {
  const tag = factor.tag ?? `Sign-in: ${factor.name}`;
  if (factor.prove) mountProve(app, ctx, factor.name, tag, factor.prove);
  for (const step of factor.enroll ?? []) mountEnroll(app, ctx, factor.name, tag, step);
  await factor.register?.(app, ctx);
}

function mountProve(app: FastifyInstance, ctx: ServiceContext, name: string, tag: string, step: ProveStep) {
  app.post(`/auth/${name}`, { ...FLOW, schema: proveSchema(tag, step) }, async (req, reply) => {
    const form = formOf(req);
    const values: Record<string, string> = {};
    for (const f of step.fields) values[f.name] = field(form, f.name, { required: true, max: f.maxLength });
    const who = await identified(req, reply, ctx, form);
    await formIntent(ctx, form, who.session);
    await regulated(req, ctx, attemptOf(who), name, step.what, () => step.check(ctx, who, values));
    await proven(req, reply, ctx, who.session, name, step.sessionData);
    return reply.code(204).send();
  });
}

function mountEnroll(app: FastifyInstance, ctx: ServiceContext, name: string, tag: string, step: EnrollStep) {
  const url = `/auth/enroll/${name}${step.path ?? ''}`;
  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    const change = await credentialChange(req, ctx, name, step.op);
    const answer = await step.write(ctx, change, bodyStrings(req, step), req);
    if (step.completes !== false) await credentialChanged(req, reply, ctx, change, name);
    if (answer === undefined) return reply.code(204).send();
    reply.header('Cache-Control', 'no-store');
    return reply.code(200).type('application/json').send(JSON.stringify(answer));
  };
  app.route({ method: step.method, url, schema: enrollSchema(tag, step), handler });
}

/** The declared body fields as strings (the schema has checked their types). */
function bodyStrings(req: FastifyRequest, step: EnrollStep): Record<string, string> {
  if (!step.body) return {};
  const b = (req.body ?? {}) as Record<string, unknown>;
  if (typeof b !== 'object' || Array.isArray(b))
    throw new ApiError('BadRequest', 'the body must be a JSON object');
  const out: Record<string, string> = {};
  for (const name of Object.keys(step.body.properties)) {
    const v = b[name];
    if (typeof v === 'string') out[name] = v;
    else if (v !== undefined) throw new ApiError('InvalidField', `${name} must be a string`, { field: name });
  }
  for (const name of step.body.required)
    if (out[name] === undefined) throw new ApiError('InvalidField', `${name} is required`, { field: name });
  return out;
}

const THROTTLED = err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)');
const INTENT = { type: 'string', maxLength: 4096, description: 'Signed intent (the level asked for)' };
const EMAIL = { type: 'string', maxLength: 254, description: 'Names the user (the e-mail step folded in)' };

/**
 * The step's fields as the body schema, for both ways of sending them (form fields from the
 * pages, a flat JSON object from programs): Fastify checks each against it.
 */
function proveSchema(tag: string, step: ProveStep): RouteSchema {
  const properties: Record<string, Json> = { intent: INTENT, email: EMAIL };
  for (const f of step.fields) properties[f.name] = { type: 'string', maxLength: f.maxLength };
  const schema = { type: 'object', properties, required: step.fields.map((f) => f.name) };
  return {
    tags: [tag],
    summary: step.summary,
    security: [{ session: [] }],
    body: {
      required: true,
      content: { 'application/x-www-form-urlencoded': { schema }, 'application/json': { schema } },
    },
    response: {
      204: { description: 'Proven: the session’s level rises' },
      400: err('A missing or bad field; no user named yet'),
      403: err('Incorrect'),
      429: THROTTLED,
    },
  };
}

function enrollSchema(tag: string, step: EnrollStep): RouteSchema {
  const body = step.body && {
    type: 'object',
    properties: step.body.properties,
    required: [...step.body.required],
  };
  const media = step.body?.form ? 'application/x-www-form-urlencoded' : 'application/json';
  const response: Record<string, Json> = {
    ...(step.answer ? { 200: jsonObject('Done', step.answer) } : { 204: { description: 'Done' } }),
    400: err('A missing or bad field'),
    401: err('The session must step up (Intent)'),
    403: err('Not allowed to change this user’s credentials'),
    404: err('No such user'),
  };
  if (step.path === '/confirm') response[429] = THROTTLED;
  return {
    tags: [tag],
    summary: step.summary,
    querystring: USER_QUERY,
    ...(body ? { body: { required: true, content: { [media]: { schema: body } } } } : {}),
    response,
  };
}
