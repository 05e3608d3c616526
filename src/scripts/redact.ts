import { REDACTED } from '../core/redact.js';

/** Property names whose values are secrets wherever they appear in a hook's input. */
const SECRET_NAME = /^(password|pin|secret|token|code|otp|totp|apikey|key|backupcodes?|activationcode)$/i;
/** API keys and proxy tokens inside any string (src/core/redact.ts has the same shapes). */
const SECRET_TEXT = /gv[A-Za-z0-9]{54}|gp\.[a-z0-9]{1,64}\.[A-Za-z0-9_-]{43}/g;

/**
 * A copy of a hook's input fit for a ScriptLog: values under secret-named properties replaced,
 * API keys and proxy tokens inside strings replaced. Hooks never put secrets in inputs (hashes
 * stay in the store's hidden state); this guards against a field added later.
 */
export function redactInput(v: unknown, depth = 0): unknown {
  if (depth > 64) return REDACTED;
  if (typeof v === 'string') return v.replace(SECRET_TEXT, REDACTED);
  if (Array.isArray(v)) return v.map((x) => redactInput(x, depth + 1));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    // Defined, not assigned: a key "__proto__" (JSON.parse makes it an own property) stays data.
    for (const [k, x] of Object.entries(v as Record<string, unknown>))
      Object.defineProperty(out, k, {
        value: SECRET_NAME.test(k) ? REDACTED : redactInput(x, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  return v;
}
