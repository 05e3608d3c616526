import { timestampMs } from '../schema/fields.js';
import { allow, type Decision, deny } from './decision.js';

/*
 * Whether a user may act at all: the one answer every path asks (API keys, sessions, sign-in
 * completion, the proxy back channel, the OpenID provider, provisioning). A merged user is left
 * disabled by the merge, but is named as merged so the decision says why.
 */

/** The rule names this file decides with. */
export const USER_RULES = [
  'user.missing',
  'user.merged',
  'user.disabled',
  'user.suspended',
  'user.usable',
] as const;

/** May this user act now: not merged away, not disabled, not inside the suspension window? */
export function userStanding(doc: Record<string, unknown> | undefined, now = Date.now()): Decision {
  if (!doc) return deny('user.missing', 'the user does not exist');
  if (typeof doc.MergedInto === 'string' && doc.MergedInto !== '')
    return deny('user.merged', `the user was merged into ${doc.MergedInto}`);
  if (doc.Disabled === true) return deny('user.disabled', 'the user is disabled');
  const after = timestampMs(String(doc.SuspendAfter));
  const before = timestampMs(String(doc.SuspendBefore));
  if ((Number.isFinite(after) && now >= after) || (Number.isFinite(before) && now < before))
    return deny('user.suspended', 'the user is suspended');
  return allow('user.usable', 'the user is not disabled, merged or suspended');
}

/** userStanding as a yes or no. */
export const userUsable = (doc: Record<string, unknown>, now = Date.now()) => userStanding(doc, now).Allowed;
