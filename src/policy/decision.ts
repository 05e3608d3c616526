/**
 * What the policy answers: allowed or not, the rule that decided it, and the chain of rules,
 * memberships and levels behind it (docs/security.md, "The decision point"). Every refusal in the
 * service carries one, so the audit trail and GET /policy/explain can say why.
 */
export interface Step {
  /** Stable name of the rule that was applied, e.g. `privilege.ceiling` or `app.access-groups`. */
  Rule: string;
  Allowed: boolean;
  Reason: string;
}

export interface Decision {
  Allowed: boolean;
  /** The rule that decided: the first refusing step, or the last allowing one. */
  Rule: string;
  Reason: string;
  Chain: Step[];
}

export const allow = (rule: string, reason: string): Decision => ({
  Allowed: true,
  Rule: rule,
  Reason: reason,
  Chain: [{ Rule: rule, Allowed: true, Reason: reason }],
});

export const deny = (rule: string, reason: string): Decision => ({
  Allowed: false,
  Rule: rule,
  Reason: reason,
  Chain: [{ Rule: rule, Allowed: false, Reason: reason }],
});

/**
 * Applies checks in order and stops at the first refusal: the answer is allowed only when every
 * check allows, and its chain lists every step that was taken.
 */
export async function all(checks: ReadonlyArray<() => Decision | Promise<Decision>>): Promise<Decision> {
  const chain: Step[] = [];
  let last: Decision | undefined;
  for (const check of checks) {
    const d = await check();
    chain.push(...d.Chain);
    last = d;
    if (!d.Allowed) return { ...d, Chain: chain };
  }
  if (!last) return allow('policy.nothing-to-check', 'no rule applies');
  return { ...last, Chain: chain };
}
