import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/core/redact.js';
import { redactInput } from '../../src/scripts/redact.js';
import { judge } from '../../src/scripts/testing.js';

const KEY_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const apiKey = fc
  .array(fc.constantFrom(...KEY_CHARS.split('')), { minLength: 54, maxLength: 54 })
  .map((cs) => `gv${cs.join('')}`);
const secretName = fc.constantFrom(
  'password',
  'Password',
  'PIN',
  'secret',
  'Token',
  'code',
  'key',
  'APIKey',
  'otp',
);

describe('ScriptLog input redaction', () => {
  it('removes every value under a secret name, at any depth', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 3 }),
        secretName,
        fc.jsonValue({ maxDepth: 2 }),
        (doc, name, secret) => {
          const planted = { outer: [{ [name]: secret }], doc, [name]: secret };
          const out = redactInput(planted) as Record<string, unknown>;
          expect(out[name]).toBe(REDACTED);
          expect(((out.outer as unknown[])[0] as Record<string, unknown>)[name]).toBe(REDACTED);
        },
      ),
    );
  });

  it('removes API keys inside any string, and leaves other data as it was', () => {
    fc.assert(
      fc.property(apiKey, fc.string(), fc.string(), (key, before, after) => {
        const text = `${before}${key}${after}`;
        const out = JSON.stringify(redactInput({ note: text, list: [text] }));
        expect(out).not.toContain(key);
      }),
    );
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), (v) => {
        const s = JSON.stringify(v);
        fc.pre(
          !/gv[A-Za-z0-9]{54}|gp\./.test(s) &&
            !/"(password|pin|secret|token|code|otp|totp|apikey|key|backupcodes?|activationcode)"/i.test(s),
        );
        expect(redactInput(v)).toEqual(v);
      }),
    );
  });
});

describe('a test case verdict', () => {
  it('passes exactly when the result equals Expect, or the run failed as ExpectError says', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        // The result as it comes back from the sandbox: JSON text, parsed.
        const result = JSON.parse(JSON.stringify(v)) as unknown;
        expect(judge({ Expect: result }, true, structuredClone(result), '')).toBe('');
        expect(judge({ Expect: result }, true, { wrapped: result }, '')).not.toBe('');
        expect(judge({ Expect: result }, false, undefined, 'Error: x')).not.toBe('');
      }),
    );
    expect(judge({ ExpectError: 'boom' }, false, undefined, 'Error: BOOM here')).toBe('');
    expect(judge({ ExpectError: 'boom' }, false, undefined, 'Error: other')).not.toBe('');
    expect(judge({ ExpectError: '' }, true, 1, '')).not.toBe('');
    expect(judge({}, true, 5, '')).toBe('');
  });
});
