import { ApiError } from '../core/errors.js';
import { User } from '../objects/user.js';
import { type Doc, normalize } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { groupsOf, hasScripts, type RunOutcome, runHook, tenantOf } from './runner.js';

/*
 * The hooks (docs/scripts.md, "Hooks"): what each gives a script, what it may return, and the
 * fail-safe when a script fails or exceeds a limit (sign-in: deny; every other hook: no change).
 * Each hook does nothing, and costs nothing but a cache look-up, while no enabled script serves it.
 */

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

const failure = (o: RunOutcome) => o.raw.error || 'failed';

// ---- user-write ---------------------------------------------------------------------------------

/** Fields a user-write script may set: never Admin, Email, Active or the Have* flags. */
export const USER_SCRIPT_FIELDS = [
  'UserName',
  'Name',
  'Icon',
  'OtherEmails',
  'SuspendAfter',
  'SuspendBefore',
  'Disabled',
] as const;

export interface UserWriteInput {
  Operation: 'create' | 'update';
  /** The user as it would be stored (normalized), before the script's changes. */
  User: Doc;
  /** The stored user (update), or null. */
  Previous: Doc | null;
  /** Who is writing: the user ID of the caller ('' for a key without a user). */
  ActorUserID: string;
}

/**
 * Runs the user-write scripts on a create or update. Returns the fields to set on the body (an
 * empty object for no change). A script may return {Set: {...}} (fields of USER_SCRIPT_FIELDS,
 * validated as a client's would be) or {Reject: "reason"} (the write is refused: 422 Script
 * Rejected, with the reason). Fail-safe: no change.
 */
export async function userWriteHook(ctx: ServiceContext, input: UserWriteInput): Promise<Doc> {
  if (!(await hasScripts(ctx, 'user-write'))) return {};
  const set: Doc = {};
  let reject: string | undefined;
  const userId = String(input.Previous?.ID ?? '');
  const data = { user: input.User, groups: await groupsOf(ctx, userId), tenant: await tenantOf(ctx) };
  await runHook(ctx, 'user-write', input, data, (cur, o) => {
    if (!o.ok) return { next: cur, applied: `fail-safe: no change (${failure(o)})` };
    const r = o.result;
    if (r === undefined || r === null) return { next: cur, applied: 'no change' };
    if (!isObject(r)) return { next: cur, applied: 'fail-safe: no change (the result is not an object)' };
    if (typeof r.Reject === 'string' && r.Reject !== '') {
      reject = r.Reject.slice(0, 512);
      return { next: cur, applied: 'rejected', stop: true };
    }
    if (r.Set === undefined) return { next: cur, applied: 'no change' };
    if (!isObject(r.Set)) return { next: cur, applied: 'fail-safe: no change (Set is not an object)' };
    const bad = Object.keys(r.Set).find((k) => !(USER_SCRIPT_FIELDS as readonly string[]).includes(k));
    if (bad) return { next: cur, applied: `fail-safe: no change (a script may not set ${bad})` };
    let checked: Doc;
    try {
      // Validated as a client's body would be: a bad value fails the script, not the request.
      const fields = Object.fromEntries(
        Object.keys(r.Set).map((k) => [k, User.fields[k] as NonNullable<(typeof User.fields)[string]>]),
      );
      checked = normalize(fields, r.Set, undefined);
    } catch (e) {
      return { next: cur, applied: `fail-safe: no change (${(e as Error).message})`.slice(0, 256) };
    }
    Object.assign(set, checked);
    return {
      next: { ...cur, User: { ...cur.User, ...checked } },
      applied: `set ${Object.keys(checked).join(', ')}`,
    };
  });
  if (reject !== undefined) throw new ApiError('ScriptRejected', reject);
  return set;
}

// ---- sign-in ------------------------------------------------------------------------------------

export interface SignInInput {
  User: Doc;
  /** The factor just proven. */
  Factor: string;
  /** Every factor the session has proven, this one included. */
  Factors: string[];
  /** The session's integrity level once this factor counts. */
  Level: number;
  Address: string;
  UserAgent: string;
}

export interface SignInDecision {
  /** false: refuse this sign-in step (403 Script Denied) with Reason shown to the person. */
  allow: boolean;
  /** The level this session must reach before it is authorized (0: no extra requirement). */
  requireLevel: number;
  reason: string;
}

const FAIL_SAFE_REASON = 'the sign-in rules could not be checked; try again later or ask your administrator';

/**
 * Runs the sign-in scripts after a factor is proven. A script returns nothing or {Allow: true}
 * (allow), {Deny: "reason"}, or {RequireLevel: 1..4, Reason: "..."}; several scripts: a deny
 * wins, and the highest required level counts. Fail-safe: deny.
 */
export async function signInDecision(ctx: ServiceContext, input: SignInInput): Promise<SignInDecision> {
  const decision: SignInDecision = { allow: true, requireLevel: 0, reason: '' };
  if (!(await hasScripts(ctx, 'sign-in'))) return decision;
  const data = {
    user: input.User,
    groups: await groupsOf(ctx, String(input.User.ID ?? '')),
    tenant: await tenantOf(ctx),
  };
  const deny = (reason: string) => {
    decision.allow = false;
    decision.reason = reason.slice(0, 512);
  };
  await runHook(ctx, 'sign-in', input, data, (cur, o) => {
    if (!o.ok) {
      deny(FAIL_SAFE_REASON);
      return { next: cur, applied: `fail-safe: deny (${failure(o)})`, stop: true };
    }
    const r = o.result;
    if (r === undefined || r === null) return { next: cur, applied: 'allow' };
    if (!isObject(r)) {
      deny(FAIL_SAFE_REASON);
      return { next: cur, applied: 'fail-safe: deny (the result is not an object)', stop: true };
    }
    const reason = typeof r.Reason === 'string' ? r.Reason : '';
    if (r.Deny !== undefined && r.Deny !== false && r.Deny !== '') {
      deny(typeof r.Deny === 'string' ? r.Deny : reason || 'sign-in refused by policy');
      return { next: cur, applied: 'deny', stop: true };
    }
    if (r.RequireLevel !== undefined) {
      const n = r.RequireLevel;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 4) {
        deny(FAIL_SAFE_REASON);
        return { next: cur, applied: 'fail-safe: deny (RequireLevel must be 0..4)', stop: true };
      }
      if (n > decision.requireLevel) {
        decision.requireLevel = n;
        decision.reason = reason.slice(0, 512);
      }
      return { next: cur, applied: `require level ${n}` };
    }
    return { next: cur, applied: 'allow' };
  });
  return decision;
}

// ---- group-membership -----------------------------------------------------------------------------

export interface GroupMembershipInput {
  Operation: 'create' | 'update';
  User: Doc;
  /** The user's memberships now: ID (group), Name, State. */
  Groups: Doc[];
}

/**
 * Runs the group-membership scripts after a user is created or updated. A script returns
 * {Groups: ["<group id>", ...]}: the groups the script wants the user in. Returns that list (of
 * the last script that answered well), or undefined for no change (no script, or fail-safe).
 * Applying it (add missing, remove what scripts added earlier and no longer list) is the caller's
 * (src/api/scripthooks.ts, through the membership lifecycle).
 */
export async function groupMembershipHook(
  ctx: ServiceContext,
  input: GroupMembershipInput,
): Promise<string[] | undefined> {
  if (!(await hasScripts(ctx, 'group-membership'))) return undefined;
  let wanted: string[] | undefined;
  const data = { user: input.User, groups: input.Groups, tenant: await tenantOf(ctx) };
  await runHook(ctx, 'group-membership', input, data, (cur, o) => {
    if (!o.ok) return { next: cur, applied: `fail-safe: no change (${failure(o)})` };
    const r = o.result;
    if (r === undefined || r === null) return { next: cur, applied: 'no change' };
    const list = isObject(r) ? r.Groups : undefined;
    if (
      !Array.isArray(list) ||
      list.length > 1000 ||
      !list.every((g) => typeof g === 'string' && g.length <= 64)
    )
      return { next: cur, applied: 'fail-safe: no change (Groups must be an array of group IDs)' };
    wanted = [...new Set(list as string[])];
    return {
      next: { ...cur, Groups: wanted.map((id) => ({ ID: id, Name: '', State: 'wanted' })) },
      applied: `groups ${wanted.join(', ')}`.slice(0, 256),
    };
  });
  return wanted;
}

// ---- suggestions (issue #16 calls these) ------------------------------------------------------------

/** A refined list must be a list of objects, at most this long. */
const MAX_SUGGESTIONS = 10_000;

function refineList(r: unknown): Doc[] | string {
  const list = isObject(r) ? r.Suggestions : undefined;
  if (!Array.isArray(list)) return 'the result has no Suggestions array';
  if (list.length > MAX_SUGGESTIONS) return 'too many suggestions';
  if (!list.every(isObject)) return 'every suggestion must be an object';
  return list as Doc[];
}

/**
 * account-suggestions: refines what the directory suggests for a user's accounts
 * (POST /users/:id/accounts/suggest). Input {User, Groups, Suggestions}; a script returns
 * {Suggestions: [...]} (filtered, reordered or annotated objects) or nothing (no change).
 * Returns the refined list; fail-safe: the suggestions unchanged.
 */
export async function refineAccountSuggestions(
  ctx: ServiceContext,
  user: Doc,
  suggestions: readonly Doc[],
): Promise<Doc[]> {
  if (!(await hasScripts(ctx, 'account-suggestions'))) return [...suggestions];
  const groups = await groupsOf(ctx, String(user.ID ?? ''));
  const data = { user, groups, tenant: await tenantOf(ctx) };
  const out = await runHook(
    ctx,
    'account-suggestions',
    { User: user, Groups: groups, Suggestions: [...suggestions] },
    data,
    (cur, o) => {
      if (!o.ok) return { next: cur, applied: `fail-safe: no change (${failure(o)})` };
      if (o.result === undefined || o.result === null) return { next: cur, applied: 'no change' };
      const list = refineList(o.result);
      if (typeof list === 'string') return { next: cur, applied: `fail-safe: no change (${list})` };
      return { next: { ...cur, Suggestions: list }, applied: `${list.length} suggestions` };
    },
  );
  return out.Suggestions;
}

/**
 * merge-suggestions: refines the list of users that look like duplicates (GET /users/merge).
 * Input {Suggestions} (UserMergeSuggestion objects); a script returns {Suggestions: [...]} or
 * nothing. Returns the refined list; fail-safe: the suggestions unchanged.
 */
export async function refineMergeSuggestions(
  ctx: ServiceContext,
  suggestions: readonly Doc[],
): Promise<Doc[]> {
  if (!(await hasScripts(ctx, 'merge-suggestions'))) return [...suggestions];
  const data = { user: null, groups: [], tenant: await tenantOf(ctx) };
  const out = await runHook(ctx, 'merge-suggestions', { Suggestions: [...suggestions] }, data, (cur, o) => {
    if (!o.ok) return { next: cur, applied: `fail-safe: no change (${failure(o)})` };
    if (o.result === undefined || o.result === null) return { next: cur, applied: 'no change' };
    const list = refineList(o.result);
    if (typeof list === 'string') return { next: cur, applied: `fail-safe: no change (${list})` };
    return { next: { ...cur, Suggestions: list }, applied: `${list.length} suggestions` };
  });
  return out.Suggestions;
}
