/**
 * The step-up, in place: when the session is below the level the admin API needs
 * (Tenant.IntegrityAdmin), the administrator proves another factor here, in the same session
 * (POST /auth/totp, /auth/backup, or a security key through /auth/u2f/start and /finish), and
 * the console carries on without leaving the page. Factors that need another page or device
 * (an e-mail link, a phone) go through the sign-in page with the refused request's intent and
 * come back to the console.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, type Doc, type ErrorBody } from './api.js';

const IN_PLACE: Record<string, string> = {
  totp: 'Authenticator app',
  backup: 'Backup code',
  u2f: 'Security key or passkey',
};
const HINT: Record<string, string> = {
  totp: 'The 6-digit code your authenticator app shows now.',
  backup: 'One of your backup codes (each works once).',
};

const b64u = (buf: ArrayBuffer) =>
  btoa(String.fromCharCode(...new Uint8Array(buf)))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
const unb64u = (s: string) =>
  Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0)).buffer;

/** A security-key proof: the browser's WebAuthn call between the service's start and finish. */
async function proveWithKey(intent: string): Promise<number> {
  const start = await call<Doc>('POST', '/auth/u2f/start', {
    form: intent ? { intent } : {},
    accept: [400, 409],
  });
  if (start.status !== 200) return start.status;
  const o = start.data;
  const cred = (await navigator.credentials.get({
    publicKey: {
      ...o,
      challenge: unb64u(o.challenge),
      allowCredentials: (o.allowCredentials ?? []).map((c: Doc) => ({ ...c, id: unb64u(c.id) })),
    },
  })) as PublicKeyCredential | null;
  if (!cred) return 400;
  const r = cred.response as AuthenticatorAssertionResponse;
  const fin = await call('POST', '/auth/u2f/finish', {
    json: {
      id: cred.id,
      rawId: b64u(cred.rawId),
      type: cred.type,
      response: {
        clientDataJSON: b64u(r.clientDataJSON),
        authenticatorData: b64u(r.authenticatorData),
        signature: b64u(r.signature),
        ...(r.userHandle ? { userHandle: b64u(r.userHandle) } : {}),
      },
      clientExtensionResults: {},
      ...(intent ? { intent } : {}),
    },
    accept: [400, 403, 429],
  });
  return fin.status;
}

interface Props {
  /** The refusal that asked for it (its intent), or none when the console opened below the level. */
  refusal?: ErrorBody | undefined;
  need: number;
  onDone: () => void;
  /** 1: the page's own prompt (with its heading); 2: inside the dialog, which has the heading. */
  level: 1 | 2;
}

export function StepUpForm({ refusal, need, onDone, level }: Props) {
  const intent = refusal?.Intent ?? '';
  const [factors, setFactors] = useState<string[]>();
  const [method, setMethod] = useState('');
  const [code, setCode] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    call<Doc>('POST', '/auth', { form: intent ? { intent } : {}, accept: [400] }).then((r) => {
      const all: string[] = Array.isArray(r.data?.Factors) ? r.data.Factors : [];
      const here = [...new Set(all.map((f) => (f.startsWith('u2f') ? 'u2f' : f)))].filter(
        (f) => f in IN_PLACE,
      );
      setFactors(here);
      setMethod(here[0] ?? '');
    });
  }, [intent]);
  useEffect(() => input.current?.focus(), [method]);

  const finish = async (status: number) => {
    if (status === 204 || status === 200) {
      const st = await call<Doc>('POST', '/auth', { form: intent ? { intent } : {}, accept: [400] });
      if (Number(st.data?.IntegrityLevel ?? 0) >= need) return onDone();
      setError('That worked, but this session needs one more proof.');
    } else if (status === 429) setError('Too many attempts. Wait a moment and try again.');
    else setError('That is not correct. Please try again.');
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      if (method === 'u2f') await finish(await proveWithKey(intent));
      else {
        const r = await call('POST', `/auth/${method}`, {
          form: { code: code.trim(), ...(intent ? { intent } : {}) },
          accept: [400, 403, 429],
        });
        setCode('');
        await finish(r.status);
      }
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const back = `/signin?return=${encodeURIComponent(location.pathname)}${intent ? `&intent=${encodeURIComponent(intent)}` : ''}`;
  return (
    <div class="stepup">
      {level === 1 && <h1 id="stepup-h">Confirm it's you</h1>}
      <p class="lead">
        Administration needs a second proof of who you are (integrity level {need}). Nothing is lost: the
        console carries on once you have confirmed.
      </p>
      {factors === undefined && <p class="muted">Looking up your sign-in methods…</p>}
      {factors && factors.length > 1 && (
        <fieldset class="methods">
          <legend>Confirm with</legend>
          {factors.map((f) => (
            <label class="radio" key={f}>
              <input
                type="radio"
                name="stepup-method"
                value={f}
                checked={method === f}
                onChange={() => setMethod(f)}
              />
              {IN_PLACE[f]}
            </label>
          ))}
        </fieldset>
      )}
      {method && (
        <form onSubmit={submit}>
          {error && (
            <div class="alert error" role="alert">
              {error}
            </div>
          )}
          {method === 'u2f' ? (
            <p class="muted">Your browser asks for your security key or passkey.</p>
          ) : (
            <>
              <label for="stepup-code">Code</label>
              <input
                ref={input}
                id="stepup-code"
                name="code"
                inputMode={method === 'totp' ? 'numeric' : 'text'}
                autocomplete="one-time-code"
                required
                value={code}
                onInput={(e) => setCode(e.currentTarget.value)}
                aria-describedby="stepup-hint"
              />
              <p class="muted hint" id="stepup-hint">
                {HINT[method]}
              </p>
            </>
          )}
          <button type="submit" disabled={busy}>
            {method === 'u2f' ? 'Use my security key' : 'Confirm'}
          </button>
        </form>
      )}
      {factors && factors.length === 0 && (
        <p>
          You have no second factor this page can check. Set one up in your security settings, or use another
          way below.
        </p>
      )}
      <p class="other-way">
        <a href={back}>Confirm another way</a> (the sign-in page, then back here)
      </p>
    </div>
  );
}
