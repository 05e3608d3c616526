/**
 * The sign-in page (/signin): the e-mail step, then one factor at a time until the session
 * reaches the level asked for, then "signed in" or the return URL. The factors, their words and
 * their forms come from the server's description (src/web/factorforms.ts, the data-factors
 * attribute); the parts of factors not typed into fields are webauthn.ts, otp.ts, pstn.ts, mobile.ts.
 */
import { type ApiResult, api, explain } from './api.js';
import { $, alertBox, setSignedIn, show } from './dom.js';
import type { PageState } from './page.js';
import { FactorWait } from './wait.js';

/** The session's AuthResponse (POST /auth, docs/signin.md) as the page reads it. */
interface AuthState {
  UserID?: string;
  Email?: string;
  Active?: boolean;
  Authorized?: boolean;
  Factors: string[];
  Proven: string[];
  IntegrityLevel: number;
  RequiredLevel: number;
  ReachableLevel: number;
  LocationRequired?: boolean;
  Reason?: string;
}

/** A factor as the server describes it (src/web/factorforms.ts, PageFactor), from #step-factors. */
interface PageFactor {
  name: string;
  kind: string;
  label: string;
  proof: string;
  rank?: number;
  choiceOf?: string;
  fields?: { name: string; id: string }[];
}

function readFactors(): PageFactor[] {
  const raw = document.getElementById('step-factors')?.getAttribute('data-factors');
  try {
    return raw ? (JSON.parse(raw) as PageFactor[]) : [];
  } catch {
    return [];
  }
}

const FACTORS = readFactors();
const byName = (name: string) => FACTORS.find((f) => f.name === name);
// The choices, best first; a factor proven through another's choice (u2f_uv) is offered as that one.
const CHOICES = FACTORS.filter((f) => f.rank !== undefined)
  .sort((a, b) => (a.rank ?? 0) - (b.rank ?? 0))
  .map((f) => f.name);
const FORMS = FACTORS.filter((f) => f.rank !== undefined || f.fields).map((f) => `f-${f.name}`);
const kindOf = (name: string) => byName(name)?.kind ?? '';
const labelOf = (name: string) => byName(name)?.label ?? '';
const choiceOf = (name: string) => byName(name)?.choiceOf ?? name;
const choicesAmong = (list: string[]) =>
  list.map(choiceOf).filter((f, i, a) => a.indexOf(f) === i && CHOICES.indexOf(f) >= 0);

function proofs(list: string[]): string {
  // Never a factor's internal name: a factor without words here is "another way of signing in".
  const words = list.map((f) => byName(f)?.proof || labelOf(f) || 'another way of signing in');
  return words.length < 2
    ? words.join('')
    : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

function heading(text: string): void {
  $('h-signin').textContent = text;
  document.title = `${text} · ${document.title.split(' · ').slice(1).join(' · ')}`;
}

export interface SigninHooks {
  /** Offer passkeys through the e-mail field's autofill (webauthn.ts). */
  emailStep: () => void;
  /** The phone factor's list of phones, loaded when it is chosen (pstn.ts). */
  pstnLoad: () => void;
}

/** The sign-in as the page follows it; the factor modules draw it again through render(). */
export class SigninFlow {
  readonly wait = new FactorWait(() => this.render());
  private chosen = '';
  private askedLocation = false;
  private locationAnswer = '';

  constructor(
    readonly page: PageState,
    private readonly hooks: SigninHooks,
  ) {}

  private authState(): Promise<AuthState | null> {
    return api<AuthState>('POST', '/auth', { form: { intent: this.page.intent } }).then((r) => {
      if (r.status === 400 && this.page.intent) {
        this.page.intent = '';
        return this.authState();
      }
      return r.data;
    });
  }

  // With an intent, Authorized answers for the intent: whether the person is signed in is asked apart.
  private withSignedIn(st: AuthState | null): Promise<[AuthState | null, boolean]> {
    if (!st || !this.page.intent || !st.UserID) return Promise.resolve([st, !!st?.Authorized]);
    return api<AuthState>('POST', '/auth').then((r) => [st, !!r.data?.Authorized]);
  }

  private finish(st: AuthState): Promise<void> {
    const next: Promise<ApiResult<unknown> | null> = st.Active
      ? Promise.resolve(null)
      : api('POST', '/auth/activate');
    return next.then((r) => {
      if (r && r.status === 403) {
        show($('step-factors'), true);
        for (const id of FORMS) show($(id), false);
        show($('f-activation_code'), true);
        alertBox('error', 'Your account needs an activation code.');
        return;
      }
      if (this.page.returnUrl) {
        window.location.assign(this.page.returnUrl);
        return;
      }
      show($('step-email'), false);
      show($('step-factors'), false);
      show($('step-done'), true);
      heading('You are signed in');
      show($('lead'), false);
      setSignedIn(true);
      $('done-who').textContent = st.Email ?? '';
      $('done-how').textContent = st.Proven.length ? `You proved who you are with ${proofs(st.Proven)}.` : '';
    });
  }

  /** Location policy (docs/signin.md): the level needs a location inside the tenant's regions. */
  private askLocation(st: AuthState): void {
    if (st.LocationRequired && !this.askedLocation && navigator.geolocation) {
      this.askedLocation = true;
      navigator.geolocation.getCurrentPosition(
        (pos) => {
          api('POST', '/auth/location', {
            form: { lat: String(pos.coords.latitude), long: String(pos.coords.longitude) },
          }).then(() => {
            this.locationAnswer = 'outside';
            return this.render();
          });
        },
        () => {
          this.locationAnswer = 'refused';
          this.render();
        },
      );
    } else if (st.LocationRequired && this.locationAnswer) {
      alertBox(
        'error',
        this.locationAnswer === 'refused'
          ? 'Your location is needed for full access; the browser did not give it.'
          : 'Full access is possible only from one of the allowed locations.',
      );
    }
  }

  render(): Promise<void> {
    return this.authState()
      .then((st) => this.withSignedIn(st))
      .then(([st, signed]) => {
        if (!st) {
          alertBox('error', 'The service did not answer.');
          return;
        }
        setSignedIn(signed);
        // Signed in, and sent here by a refused request (an intent) or already signed in on arrival:
        // a step-up, not a new sign-in.
        const stepUp = signed && (this.page.intent !== '' || this.page.signedInAtLoad);
        heading(stepUp ? 'Confirm it\u2019s you' : 'Sign in');
        show($('lead'), true);
        if (!st.UserID) {
          show($('step-email'), true);
          show($('step-factors'), false);
          show($('step-done'), false);
          $('email').focus();
          this.hooks.emailStep();
          return;
        }
        this.askLocation(st);
        const target = Math.max(st.RequiredLevel, st.ReachableLevel);
        if (st.Authorized && st.IntegrityLevel >= target) return this.finish(st);
        this.showFactors(st, stepUp);
        return;
      });
  }

  /** One factor at a time: prefer one of a kind not proven yet (that is what raises the level). */
  private showFactors(st: AuthState, stepUp: boolean): void {
    show($('step-email'), false);
    show($('step-done'), false);
    show($('step-factors'), true);
    $('who-email').textContent = st.Email ?? '';
    $('who-label').textContent = stepUp ? 'Signed in as' : 'Signing in as';
    const provenKinds = st.Proven.map(kindOf);
    const offered = choicesAmong(st.Factors);
    const ordered = CHOICES.filter((f) => offered.indexOf(f) >= 0);
    const useful = ordered.filter((f) => provenKinds.indexOf(kindOf(f)) < 0);
    const choices = useful.length ? useful : ordered;
    if (choices.indexOf(this.chosen) < 0) this.chosen = choices[0] || '';
    let first: HTMLInputElement | null = null;
    for (const id of FORMS) {
      const form = document.getElementById(id);
      if (!form) continue;
      const on = id === `f-${this.chosen}`;
      show(form, on);
      if (on) first = form.querySelector('input');
    }
    const others = $('other-ways');
    others.textContent = '';
    for (const f of choices.filter((c) => c !== this.chosen)) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary';
      b.textContent = `Use ${labelOf(f)} instead`;
      b.addEventListener('click', () => {
        this.chosen = f;
        this.render();
      });
      others.appendChild(b);
    }
    show($('f-activation_code'), false);
    if (this.chosen === 'pstn') this.hooks.pstnLoad();
    show($('no-factor'), st.Factors.length === 0 && !st.LocationRequired);
    $('progress').textContent = st.Proven.length
      ? `You proved ${proofs(st.Proven)}. One more step is needed${stepUp ? ' for what you asked to do.' : ' to sign in.'}${
          st.Reason ? ` ${st.Reason}` : ''
        }`
      : '';
    if (first) (first as HTMLInputElement).focus();
  }

  /** A factor's form that posts its fields (id of the form field per API field) to `path`. */
  bindStep(formId: string, path: string, fieldMap: Record<string, string>): void {
    const f = document.getElementById(formId) as HTMLFormElement | null;
    if (!f) return;
    f.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const form: Record<string, string> = { intent: this.page.intent };
      for (const [k, id] of Object.entries(fieldMap)) form[k] = $<HTMLInputElement>(id).value;
      api('POST', path, { form }).then((r) => {
        if (r.status === 204) {
          alertBox('', '');
          f.reset();
          return this.render();
        }
        alertBox('error', explain(r));
        // A wrong secret is not left in the field to be corrected: type it again (the e-mail stays).
        if (formId !== 'f-email') {
          f.reset();
          const input = f.querySelector('input');
          if (input) input.focus();
        }
        return undefined;
      });
    });
  }
}

/** Binds the sign-in page; `factors` bind the out-of-band factors' parts, in this order. */
export function initSignin(page: PageState, hooks: SigninHooks, factors: ((flow: SigninFlow) => void)[]) {
  const flow = new SigninFlow(page, hooks);
  flow.bindStep('f-email', '/auth/email', { email: 'email' });
  // Every typed factor posts its fields to its own step.
  for (const f of FACTORS) {
    if (!f.fields) continue;
    const map: Record<string, string> = {};
    for (const x of f.fields) map[x.name] = x.id;
    flow.bindStep(`f-${f.name}`, `/auth/${f.name}`, map);
  }
  for (const bind of factors) bind(flow);
  $('not-me').addEventListener('click', () => {
    api('POST', '/auth/signout').then(() => {
      alertBox('', '');
      return flow.render();
    });
  });
  flow.render();
}
