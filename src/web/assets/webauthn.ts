/**
 * Security keys and passkeys on the pages: on the sign-in page the factor step, the "Sign in with
 * a passkey" button and the e-mail field's autofill (conditional mediation); on the settings page
 * the list, add and remove. The options and answers travel as WebAuthn JSON with base64url byte
 * strings, converted here (no reliance on the newer parse*FromJSON helpers).
 */
import { type ApiResult, api, messageOf, tooMany } from './api.js';
import { $, alertBox, find, signinFor } from './dom.js';

const body = document.body;
/** The intent as the page gave it (the sign-in flow may drop a refused one for its own calls). */
const intent = body.getAttribute('data-intent') || '';
// data-passkeys="no": this configuration has no relying party (no sign-in URL with a host name).
const offered = body.getAttribute('data-passkeys') !== 'no';
const supported = !!(window.PublicKeyCredential && navigator.credentials) && offered;

function toBuf(s: string): ArrayBuffer {
  let b64 = s.replace(/-/g, '+').replace(/_/g, '/');
  while (b64.length % 4) b64 += '=';
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}
function toB64u(buf: ArrayBuffer): string {
  const bytes = new Uint8Array(buf);
  let bin = '';
  for (let i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i] as number);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

interface Descriptor {
  id: string;
  transports?: AuthenticatorTransport[];
}
const descriptors = (list: Descriptor[] | undefined): PublicKeyCredentialDescriptor[] =>
  (list || []).map((c) => ({ type: 'public-key', id: toBuf(c.id), transports: c.transports }));

function explain(r: ApiResult<unknown>): string {
  const wait = tooMany(r);
  if (wait) return wait;
  if (r.status === 403) return 'That security key or passkey was not accepted.';
  return messageOf(r);
}

function assertionJSON(cred: PublicKeyCredential) {
  const r = cred.response as AuthenticatorAssertionResponse;
  return {
    id: cred.id,
    rawId: toB64u(cred.rawId),
    type: cred.type,
    response: {
      clientDataJSON: toB64u(r.clientDataJSON),
      authenticatorData: toB64u(r.authenticatorData),
      signature: toB64u(r.signature),
      userHandle: r.userHandle ? toB64u(r.userHandle) : undefined,
    },
    clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
    intent: undefined as string | undefined,
  };
}

/** POST /auth/u2f/start's options (WebAuthn JSON). */
interface RequestOptions {
  challenge: string;
  rpId?: string;
  timeout?: number;
  userVerification?: UserVerificationRequirement;
  allowCredentials?: Descriptor[];
}

/** Sign-in with a key: the autofill's pending request, if one is waiting, and the one way to ask. */
class KeySignin {
  private pending: AbortController | null = null;

  stopAutofill(): void {
    if (this.pending) {
      this.pending.abort();
      this.pending = null;
    }
  }

  /** start -> navigator.credentials.get -> finish; resolves true when signed in. */
  signIn(mediation: '' | 'conditional'): Promise<boolean> {
    const controller = new AbortController();
    if (mediation === 'conditional') this.pending = controller;
    return api<RequestOptions>('POST', '/auth/u2f/start', { form: { intent } }).then((r) => {
      if (r.status !== 200 || !r.data) {
        if (mediation !== 'conditional') alertBox('error', explain(r));
        return false;
      }
      const o = r.data;
      const publicKey: PublicKeyCredentialRequestOptions = {
        challenge: toBuf(o.challenge),
        rpId: o.rpId,
        timeout: o.timeout,
        userVerification: o.userVerification,
        allowCredentials: descriptors(o.allowCredentials),
      };
      const req: CredentialRequestOptions = { publicKey, signal: controller.signal };
      if (mediation) req.mediation = mediation;
      return navigator.credentials.get(req).then(
        (cred) => {
          if (this.pending === controller) this.pending = null;
          const answer = assertionJSON(cred as PublicKeyCredential);
          if (intent) answer.intent = intent;
          return api('POST', '/auth/u2f/finish', { json: answer }).then((f) => {
            if (f.status === 200) {
              window.location.reload();
              return true;
            }
            alertBox('error', explain(f));
            return false;
          });
        },
        (err: Error | null) => {
          if (err?.name === 'AbortError') return false;
          if (mediation !== 'conditional')
            alertBox('error', `The security key did not answer (${err ? err.name : err}).`);
          return false;
        },
      );
    });
  }

  /** The e-mail step: offer the passkeys of this device in the e-mail field's autofill. */
  autofill(): void {
    if (!supported || this.pending || !PublicKeyCredential.isConditionalMediationAvailable) return;
    PublicKeyCredential.isConditionalMediationAvailable().then((ok) => {
      if (ok) this.signIn('conditional');
    });
  }
}

/** Binds the sign-in page's key parts; returns what the e-mail step calls. */
export function initKeySignin(): () => void {
  const keys = new KeySignin();
  const button = find('passkey-signin');
  if (button && supported) {
    button.hidden = false;
    button.addEventListener('click', () => {
      keys.stopAutofill();
      keys.signIn('');
    });
  }
  const form = find('f-u2f');
  if (form)
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      keys.stopAutofill();
      // Why keys cannot work here is the operator's to fix (the log says how), not the person's.
      if (!offered) {
        alertBox(
          'error',
          'Security keys cannot be used on this site at the moment. Please choose another way to sign in.',
        );
        return;
      }
      if (!supported) {
        alertBox('error', 'This browser cannot use security keys.');
        return;
      }
      keys.signIn('');
    });
  return () => keys.autofill();
}

// ---- security settings ---------------------------------------------------------------------------

function toSignin(r: ApiResult<unknown>): boolean {
  const e = r.data as { Intent?: string } | null;
  if (r.status === 401 && e && e.Intent) {
    window.location.assign(signinFor('/signin/enroll', e.Intent));
    return true;
  }
  return false;
}

interface KeyCredential {
  ID: string;
  Name: string;
  Passkey?: boolean;
  CreateTime: string;
  LastUsed?: string;
}

function keyItem(c: KeyCredential): HTMLLIElement {
  const li = document.createElement('li');
  const name = document.createElement('span');
  name.textContent = `${c.Name}${c.Passkey ? ' (passkey)' : ''} · added ${new Date(c.CreateTime).toLocaleDateString()}${
    c.LastUsed ? `, last used ${new Date(c.LastUsed).toLocaleDateString()}` : ', not used yet'
  }`;
  const rm = document.createElement('button');
  rm.type = 'button';
  rm.className = 'danger';
  rm.textContent = 'Remove';
  rm.setAttribute('aria-label', `Remove ${c.Name}`);
  rm.addEventListener('click', () => {
    api('DELETE', `/auth/enroll/u2f/${encodeURIComponent(c.ID)}`).then((d) => {
      if (toSignin(d)) return;
      if (d.status === 204) {
        alertBox('ok', `${c.Name} removed.`);
        listKeys();
      } else alertBox('error', explain(d));
    });
  });
  li.appendChild(name);
  li.appendChild(rm);
  return li;
}

function listKeys(): Promise<void> {
  return api<{ Credentials: KeyCredential[] }>('GET', '/auth/enroll/u2f').then((r) => {
    if (r.status !== 200 || !r.data) return;
    const list = $('keys');
    list.textContent = '';
    const n = r.data.Credentials.length;
    const badge = $('st-u2f');
    badge.textContent = n ? `${n} registered` : 'not set up';
    badge.className = `badge${n ? ' on' : ''}`;
    for (const c of r.data.Credentials) list.appendChild(keyItem(c));
  });
}

/** POST /auth/enroll/u2f's options (WebAuthn JSON). */
interface CreationOptions {
  rp: PublicKeyCredentialRpEntity;
  challenge: string;
  timeout?: number;
  attestation?: AttestationConveyancePreference;
  user: { id: string; name: string; displayName: string };
  pubKeyCredParams: PublicKeyCredentialParameters[];
  excludeCredentials?: Descriptor[];
  authenticatorSelection?: AuthenticatorSelectionCriteria;
  extensions?: AuthenticationExtensionsClientInputs;
}

function registration(name: string, cred: PublicKeyCredential) {
  const resp = cred.response as AuthenticatorAttestationResponse;
  return {
    Name: name,
    Credential: {
      id: cred.id,
      rawId: toB64u(cred.rawId),
      type: cred.type,
      response: {
        clientDataJSON: toB64u(resp.clientDataJSON),
        attestationObject: toB64u(resp.attestationObject),
        transports: resp.getTransports ? resp.getTransports() : [],
      },
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
    },
  };
}

function addKey(ev: Event): void {
  ev.preventDefault();
  if (!supported) {
    alertBox('error', 'This browser cannot use security keys.');
    return;
  }
  const name = $<HTMLInputElement>('key-name').value;
  api<CreationOptions>('POST', '/auth/enroll/u2f', { json: {} }).then((r) => {
    if (toSignin(r)) return undefined;
    if (r.status !== 200 || !r.data) {
      alertBox('error', explain(r));
      return undefined;
    }
    const o = r.data;
    const publicKey: PublicKeyCredentialCreationOptions = {
      rp: o.rp,
      challenge: toBuf(o.challenge),
      timeout: o.timeout,
      attestation: o.attestation,
      user: { id: toBuf(o.user.id), name: o.user.name, displayName: o.user.displayName },
      pubKeyCredParams: o.pubKeyCredParams,
      excludeCredentials: descriptors(o.excludeCredentials),
      authenticatorSelection: o.authenticatorSelection,
      extensions: o.extensions,
    };
    return navigator.credentials.create({ publicKey }).then(
      (cred) =>
        api<{ Name: string }>('POST', '/auth/enroll/u2f/confirm', {
          json: registration(name, cred as PublicKeyCredential),
        }).then((c) => {
          if (toSignin(c)) return;
          if (c.status === 200 && c.data) {
            $<HTMLFormElement>('e-u2f').reset();
            alertBox('ok', `${c.data.Name} added.`);
            listKeys();
          } else alertBox('error', explain(c));
        }),
      (err: Error | null) => {
        alertBox('error', `The security key was not registered (${err ? err.name : err}).`);
      },
    );
  });
}

export function initKeyEnroll(): void {
  const form = find('e-u2f');
  if (!form) return;
  form.addEventListener('submit', addKey);
  listKeys();
}
