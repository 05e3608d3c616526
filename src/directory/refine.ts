import type { Doc } from '../schema/fields.js';
import { refineAccountSuggestions, refineMergeSuggestions } from '../scripts/hooks.js';
import type { ServiceContext } from '../store/service.js';
import type { UserMergeSuggestion } from './mergesuggest.js';
import type { AccountSuggestion } from './suggest.js';

/*
 * What the scripts' suggestion hooks (src/scripts/hooks.ts) may change in what the directory
 * suggests: drop entries, reorder them and re-word their Reason. They cannot add an entry or
 * change what one does (its user, target, action or account), since a suggestion can become a
 * plan of account changes: an entry the script returns is kept only when it names one the
 * directory suggested, and only its Reason is taken from the script.
 */

const MAX_REASON = 1024;

const reasonOf = (refined: Doc, fallback: string) =>
  typeof refined.Reason === 'string' && refined.Reason.trim() !== ''
    ? refined.Reason.slice(0, MAX_REASON)
    : fallback;

/** Keeps the refined entries that match an original one by `key`, each original at most once. */
function keepKnown<T extends { Reason: string }>(
  originals: readonly T[],
  refined: readonly Doc[],
  key: (d: Doc | T) => string,
  withReason: (o: T, reason: string) => T,
): T[] {
  const left = new Map<string, T[]>();
  for (const o of originals) left.set(key(o), [...(left.get(key(o)) ?? []), o]);
  const out: T[] = [];
  for (const r of refined) {
    const o = left.get(key(r))?.shift();
    if (o) out.push(withReason(o, reasonOf(r, o.Reason)));
  }
  return out;
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/** The account changes suggested for a user, as the account-suggestions scripts refine them. */
export async function refinedAccountSuggestions(
  ctx: ServiceContext,
  user: Doc,
  suggested: readonly AccountSuggestion[],
): Promise<AccountSuggestion[]> {
  const refined = await refineAccountSuggestions(ctx, user, suggested as unknown as Doc[]);
  return keepKnown(
    suggested,
    refined,
    (d) => JSON.stringify([str(d.Action), str(d.UserID), str(d.AppID), str(d.AccountID), str(d.AccountName)]),
    (o, Reason) => ({ ...o, Reason }),
  );
}

/** The merge suggestions, as the merge-suggestions scripts refine them. */
export async function refinedMergeSuggestions(
  ctx: ServiceContext,
  suggested: readonly UserMergeSuggestion[],
): Promise<UserMergeSuggestion[]> {
  const refined = await refineMergeSuggestions(ctx, suggested as unknown as Doc[]);
  return keepKnown(
    suggested,
    refined,
    (d) => JSON.stringify([Array.isArray(d.UserIDs) ? d.UserIDs.map(str) : [], str(d.Detail)]),
    // The Reason of a merge suggestion is one of three words; a script's wording goes beside it.
    (o, Reason) => (Reason === o.Reason ? o : { ...o, Note: Reason }),
  );
}
