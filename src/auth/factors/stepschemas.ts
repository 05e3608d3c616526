import { err, formBody, type Json, jsonObject, queryOf, type RouteSchema } from '../../core/routeschema.js';

/**
 * Route schemas shared by the sign-in factors (docs/signin.md): a sign-in step posts form fields
 * with the session cookie; an enrollment changes the caller's (or, with ?user=, an administrator's
 * chosen user's) credentials. The handlers check the fields (formOf, field in ./factor.ts).
 */

const session = [{ session: [] }];
const str = { type: 'string' };
const throttled = err('Too many attempts (header X-Next-Attempt gives when a new attempt is accepted)');

/** A sign-in step: form fields (and the optional signed intent), 204 when proven. */
export const signInStep = (tag: string, summary: string, fields: Json, required: string[]): RouteSchema => ({
  tags: [tag],
  summary,
  security: session,
  body: formBody(
    { intent: { ...str, description: 'Signed intent (the level asked for)' }, ...fields },
    required,
    true,
  ),
  response: {
    204: { description: 'Proven: the session’s level rises' },
    400: err('A missing or bad field; no user named yet'),
    403: err('Incorrect'),
    429: throttled,
  },
});

/** ?user=<id>: an administrator acting on another user's credentials. */
const forUser = queryOf({ user: { ...str, description: 'Another user (administrators)' } });

/** An enrollment change: set, generate or remove a credential (a credential change: step-up). */
export const enrollment = (
  tag: string,
  summary: string,
  opts: { body?: Json; answer?: Json } = {},
): RouteSchema => ({
  tags: [tag],
  summary,
  querystring: forUser,
  ...(opts.body ? { body: opts.body } : {}),
  response: {
    ...(opts.answer ? { 200: opts.answer } : { 204: { description: 'Done' } }),
    400: err('A missing or bad field'),
    401: err('The session must step up (Intent)'),
    403: err('Not allowed to change this user’s credentials'),
    404: err('No such user'),
  },
});

export const jsonFields = (properties: Json, required: string[]): Json => ({
  required: true,
  content: { 'application/json': { schema: { type: 'object', properties, required } } },
});

export { jsonObject };
