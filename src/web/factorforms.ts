/**
 * The sign-in factors on the pages, drawn from what each factor declares (src/auth/factors:
 * `words`, `form`, `settings`, `prove`). A factor made of typed fields is drawn from its prove
 * step's fields and needs nothing here; a factor that is not typed into fields names a browser
 * part (`client`), whose markup is below and whose script is in src/web/assets.
 */
import type { Factor } from '../auth/factors/factor.js';
import type { ClientPart, FieldInput, FieldSpec } from '../auth/factors/steps.js';
import { esc } from '../core/html.js';
import { MOBILE_ENROLL_CARD, MOBILE_SIGNIN_FORM } from './mobileui.js';
import { OTP_ENROLL_CARD, OTP_SIGNIN_FORM } from './otp.js';
import { PSTN_ENROLL_CARD, PSTN_SIGNIN_FORM } from './pstn.js';
import { BACKUP_ENROLL_CARD, TOTP_ENROLL_CARD, U2F_ENROLL_CARD, U2F_SIGNIN_FORM } from './settingscards.js';

/** What the sign-in page's script knows of each factor (the data-factors attribute). */
export interface PageFactor {
  name: string;
  kind: string;
  label: string;
  proof: string;
  /** Offered as a choice at this rank; absent: never a choice of its own. */
  rank?: number;
  /** Proven through that factor's choice. */
  choiceOf?: string;
  /** A typed form: POST /auth/<name> with these fields (input id per field). */
  fields?: { name: string; id: string }[];
}

/** An input's id: the factor's name when it has one field (#password, #totp), else factor-field. */
const inputId = (f: Factor, field: string) =>
  (f.prove?.fields.length ?? 0) === 1 ? f.name : `${f.name}-${field}`;

/** The page's list: every factor that has words (every one a session can record). */
export function pageFactors(list: readonly Factor[]): PageFactor[] {
  return list
    .filter((f) => f.words)
    .map((f) => ({
      name: f.name,
      kind: f.kind ?? '',
      label: f.words?.label ?? '',
      proof: f.words?.proof ?? '',
      ...(f.form?.rank !== undefined ? { rank: f.form.rank } : {}),
      ...(f.form?.choiceOf ? { choiceOf: f.form.choiceOf } : {}),
      ...(f.prove && !f.form?.client
        ? { fields: f.prove.fields.map((x) => ({ name: x.name, id: inputId(f, x.name) })) }
        : {}),
    }));
}

const INPUT_ATTRS: Record<FieldInput, string> = {
  secret: 'type="password"',
  'secret-digits': 'type="password" inputmode="numeric" pattern="[0-9]*"',
  digits: 'inputmode="numeric" pattern="[0-9 ]*"',
  text: 'type="text"',
};

function input(id: string, f: Pick<FieldSpec, 'input' | 'autocomplete'> & { maxLength?: number }, more = '') {
  const max = f.maxLength !== undefined ? ` maxlength="${f.maxLength}"` : '';
  return `<input id="${id}" ${INPUT_ATTRS[f.input]} autocomplete="${esc(f.autocomplete ?? 'off')}"${max}${more} required>`;
}

/** A factor's typed form, from its prove step's fields. */
function fieldsForm(f: Factor): string {
  const fields = f.prove?.fields ?? [];
  const inputs = fields
    .map(
      (x) => `
      <label for="${inputId(f, x.name)}">${esc(x.label)}</label>
      ${input(inputId(f, x.name), x, ` name="${esc(x.name)}"`)}${
        x.hint ? `\n      <p class="muted">${esc(x.hint)}</p>` : ''
      }`,
    )
    .join('');
  const hint = f.form?.hint ? `\n      <p class="muted">${esc(f.form.hint)}</p>` : '';
  return `
    <form id="f-${esc(f.name)}" class="factor" hidden>${inputs}${hint}
      <button type="submit" class="block">${esc(f.form?.submit ?? 'Continue')}</button>
    </form>`;
}

const SIGNIN_PARTS: Record<NonNullable<NonNullable<Factor['form']>['client']>, string> = {
  webauthn: U2F_SIGNIN_FORM,
  otp: OTP_SIGNIN_FORM,
  pstn: PSTN_SIGNIN_FORM,
  mobile: MOBILE_SIGNIN_FORM,
};

const byRank = (a: number | undefined, b: number | undefined) => (a ?? 1000) - (b ?? 1000);

/** The sign-in page's factor forms (hidden until the script shows the one chosen). */
export function signinForms(list: readonly Factor[], passkeys: boolean): string {
  return list
    .filter((f) => f.form && !f.form.choiceOf)
    .sort((a, b) => byRank(a.form?.rank, b.form?.rank))
    .map((f) => {
      const client = f.form?.client;
      if (client === 'webauthn' && !passkeys) return '';
      return client ? SIGNIN_PARTS[client] : fieldsForm(f);
    })
    .join('');
}

const SETTINGS_PARTS: Record<ClientPart, string> = {
  webauthn: U2F_ENROLL_CARD,
  totp: TOTP_ENROLL_CARD,
  backup: BACKUP_ENROLL_CARD,
  otp: OTP_ENROLL_CARD,
  pstn: PSTN_ENROLL_CARD,
  mobile: MOBILE_ENROLL_CARD,
};

/** A secret the person chooses (password, PIN): typed (twice if asked), PUT to its enroll step. */
function secretCard(f: Factor): string {
  const s = f.settings?.secret;
  if (!s) return '';
  const n = esc(f.name);
  const repeat = s.repeat
    ? `
      <label for="new-${n}2">${esc(s.repeat)}</label>
      ${input(`new-${n}2`, { input: s.input, autocomplete: 'new-password' })}`
    : '';
  const pattern = s.pattern ? ` pattern="${esc(s.pattern)}"` : '';
  return `
  <section class="card" aria-labelledby="h-${n}">
    <h2 id="h-${n}">${esc(f.settings?.title ?? '')}${s.flag ? ` <span id="st-${n}" class="badge"></span>` : ''}</h2>${
      f.settings?.intro ? `\n    <p class="muted">${esc(f.settings.intro)}</p>` : ''
    }
    <form id="e-${n}" data-secret="${esc(s.field)}"${s.flag ? ` data-flag="${esc(s.flag)}"` : ''} data-submit="${esc(s.submit)}" data-change="${esc(s.change)}" data-saved="${esc(s.saved)}">
      <label for="new-${n}">${esc(s.label)}</label>
      ${input(`new-${n}`, { input: s.input, autocomplete: s.input === 'secret' ? 'new-password' : 'off' }).replace(' required>', `${pattern} required>`)}${repeat}
      <button type="submit">${esc(s.submit)}</button>
    </form>
  </section>`;
}

/** The security settings page's factor cards, in their order; `extra` cards slot in by rank. */
export function settingsCards(
  list: readonly Factor[],
  passkeys: boolean,
  extra: readonly { rank: number; html: string }[] = [],
): string {
  const cards = list
    .filter((f) => f.settings)
    .map((f) => {
      const s = f.settings;
      if (!s || (s.client === 'webauthn' && !passkeys)) return { rank: 0, html: '' };
      return { rank: s.rank, html: s.client ? SETTINGS_PARTS[s.client] : secretCard(f) };
    });
  return [...cards, ...extra]
    .sort((a, b) => a.rank - b.rank)
    .map((c) => c.html)
    .join('');
}
