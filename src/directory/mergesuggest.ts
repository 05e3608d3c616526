import type { Doc } from '../schema/fields.js';

/** One line of GET /users/merge (docs/directory.md). */
export interface UserMergeSuggestion {
  /** The two users, in ID order. */
  UserIDs: [string, string];
  Reason: 'same verified e-mail' | 'same federated subject' | 'same name and Unix user name';
  /** The shared value (the address, the subject, or the name and user name stem). */
  Detail: string;
  /** A merge-suggestions script's own wording, when it gave one (src/directory/refine.ts). */
  Note?: string;
}

const norm = (s: unknown) =>
  String(s ?? '')
    .trim()
    .toLowerCase()
    .replace(/\s+/g, ' ');
/** alice, alice2 and alice_01 share the stem "alice". */
const stem = (userName: unknown) => norm(userName).replace(/[-_.]?\d+$/, '');

/**
 * THE merge suggestions (the only place they are computed; scripts may refine the list here
 * later): pairs of users, neither merged already, that share a verified e-mail address (Email or
 * OtherEmails), or a full name and user-name stem. "Same federated subject" cannot arise: a
 * provider identity (issuer and subject) links to one user only (federated_links is unique on
 * it), and a merge moves the links; the reason stays in the type for an import of users that
 * carries provider subjects.
 */
export function suggestMerges(users: readonly Doc[]): UserMergeSuggestion[] {
  const live = users.filter((u) => !u.MergedInto);
  const out = new Map<string, UserMergeSuggestion>();
  const pairUp = (groups: Map<string, string[]>, reason: UserMergeSuggestion['Reason']) => {
    for (const [detail, ids] of groups) {
      const unique = [...new Set(ids)].sort();
      for (let i = 0; i < unique.length; i++)
        for (let j = i + 1; j < unique.length; j++) {
          const pair: [string, string] = [unique[i] as string, unique[j] as string];
          const key = `${pair[0]} ${pair[1]} ${reason}`;
          if (!out.has(key)) out.set(key, { UserIDs: pair, Reason: reason, Detail: detail });
        }
    }
  };
  const byEmail = new Map<string, string[]>();
  const byName = new Map<string, string[]>();
  const add = (m: Map<string, string[]>, k: string, id: string) => m.set(k, [...(m.get(k) ?? []), id]);
  for (const u of live) {
    const id = String(u.ID);
    for (const e of [u.Email, ...((u.OtherEmails as string[] | undefined) ?? [])])
      if (norm(e) !== '') add(byEmail, norm(e), id);
    const full = norm((u.Name as Doc | undefined)?.FullName);
    if (full !== '' && stem(u.UserName) !== '') add(byName, `${full} / ${stem(u.UserName)}`, id);
  }
  pairUp(byEmail, 'same verified e-mail');
  pairUp(byName, 'same name and Unix user name');
  return [...out.values()];
}
