/**
 * The security-settings page (/signin/enroll): the secrets a person chooses (password, PIN, from
 * their factors' descriptions), the authenticator app and backup codes here; security keys in webauthn.ts, the out-of-band factors' cards in otp.ts, pstn.ts, mobile.ts.
 */
import { type ApiResult, api, errorOf, explain } from './api.js';
import { $, alertBox, setSignedIn, show, signinFor } from './dom.js';

/** The cards of secrets a person chooses (password, PIN), drawn from their factors' descriptions. */
const secretForms = () => Array.from(document.querySelectorAll<HTMLFormElement>('form[data-secret]'));

/** GET /users/me as this page reads it. */
interface Me {
  [flag: string]: unknown;
  ID: string;
  Email?: string;
  UserName?: string;
  HavePassword?: boolean;
  HavePIN?: boolean;
  HaveTOTPSecret?: boolean;
  Intent?: string;
}

/** What the cards share: the answer to a change (done), which draws the page again. */
export class EnrollPage {
  private replacingTotp = false;

  loadMe(): Promise<Me | null> {
    return api<Me>('GET', '/users/me').then((r) => {
      if (r.status === 401) {
        let to = `/signin?return=${encodeURIComponent('/signin/enroll')}`;
        if (r.data?.Intent) to += `&intent=${encodeURIComponent(r.data.Intent)}`;
        window.location.assign(to);
        return null;
      }
      const u = r.data as Me;
      const badge = (id: string, on: boolean) => {
        const el = $(id);
        el.textContent = on ? 'set up' : 'not set up';
        el.className = `badge${on ? ' on' : ''}`;
      };
      badge('st-totp', !!u.HaveTOTPSecret);
      // A secret's card says by its flag (data-flag, e.g. HavePassword) whether it is set up.
      for (const form of secretForms()) {
        if (!form.dataset.flag) continue;
        const on = u[form.dataset.flag] === true;
        badge(`st-${form.id.slice(2)}`, on);
        const button = form.querySelector('button');
        if (button) button.textContent = (on ? form.dataset.change : form.dataset.submit) ?? '';
      }
      $('enroll-who').textContent = u.Email || u.UserName || u.ID;
      show($('totp-remove'), !!u.HaveTOTPSecret);
      // Once set up, the buttons say what they now do: change, replace.
      $('totp-start').textContent = u.HaveTOTPSecret
        ? 'Replace the authenticator app'
        : 'Set up an authenticator app';
      this.replacingTotp = !!u.HaveTOTPSecret;
      setSignedIn(true);
      // Changes need the level this person's sign-in methods reach: say so before they type.
      api<{ IntegrityLevel: number; ReachableLevel: number }>('POST', '/auth').then((a) => {
        const st = a.data;
        show($('enroll-stepup'), !!(st && st.IntegrityLevel < st.ReachableLevel));
      });
      return u;
    });
  }

  /** The answer to a change: says so and draws the page again, or asks for the step-up; null when refused. */
  done(r: ApiResult<unknown>, okText: string): Promise<Me | null> | null {
    if (r.status === 204 || r.status === 200) {
      alertBox('ok', okText);
      return this.loadMe();
    }
    const e = errorOf(r);
    if (r.status === 401 && e && e.Intent) {
      window.location.assign(signinFor('/signin/enroll', e.Intent));
      return null;
    }
    alertBox('error', explain(r));
    return null;
  }

  // Back to the card's buttons; loadMe() then decides whether Remove shows.
  closeTotpSetup(): void {
    show($('totp-setup'), false);
    show($('totp-replace-note'), false);
    show($('totp-start'), true);
    show($('totp-remove'), this.replacingTotp);
    $<HTMLFormElement>('e-totp').reset();
  }

  /** Every secret's card (src/web/factorforms.ts): typed (twice if asked), PUT to its enroll step. */
  bindSecrets(): void {
    for (const form of secretForms()) {
      const name = form.id.slice(2);
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const value = $<HTMLInputElement>(`new-${name}`).value;
        const again = document.getElementById(`new-${name}2`) as HTMLInputElement | null;
        if (again && again.value !== value) {
          alertBox('error', 'The two entries differ.');
          return;
        }
        api('PUT', `/auth/enroll/${name}`, { json: { [form.dataset.secret ?? '']: value } }).then((r) => {
          if (r.status === 204) form.reset();
          this.done(r, form.dataset.saved ?? 'Saved.');
        });
      });
    }
  }

  bindTotp(): void {
    $('totp-start').addEventListener('click', () => {
      api<{ QRCode: string; Secret: string }>('POST', '/auth/enroll/totp', { json: {} }).then((r) => {
        if (r.status !== 200 || !r.data) {
          this.done(r, '');
          return;
        }
        $<HTMLImageElement>('totp-qr').src = r.data.QRCode;
        $('totp-secret').textContent = r.data.Secret;
        show($('totp-replace-note'), this.replacingTotp);
        show($('totp-start'), false);
        show($('totp-remove'), false);
        show($('totp-setup'), true);
        $('totp-code').focus();
      });
    });
    $('e-totp').addEventListener('submit', (ev) => {
      ev.preventDefault();
      api('POST', '/auth/enroll/totp/confirm', {
        json: { Code: $<HTMLInputElement>('totp-code').value },
      }).then((r) => {
        if (r.status === 204) this.closeTotpSetup();
        this.done(r, 'Authenticator app set up.');
      });
    });
    $('totp-cancel').addEventListener('click', () => this.closeTotpSetup());
    $('totp-remove').addEventListener('click', () => {
      // Removing a way to sign in is not undone by another click: ask first.
      if (!window.confirm('Remove the authenticator app? Its codes will no longer sign you in.')) return;
      api('DELETE', '/auth/enroll/totp').then((r) => {
        this.done(r, 'Authenticator app removed.');
      });
    });
  }

  bindBackupCodes(): void {
    $('backup-gen').addEventListener('click', () => {
      api<{ Codes: string[] }>('POST', '/auth/enroll/backup', { json: {} }).then((r) => {
        if (r.status !== 200 || !r.data) {
          this.done(r, '');
          return;
        }
        const list = $('backup-codes');
        list.textContent = '';
        for (const c of r.data.Codes) {
          const li = document.createElement('li');
          li.textContent = c;
          list.appendChild(li);
        }
        show($('backup-out'), true);
        alertBox('ok', 'New backup codes generated. Each works once; earlier codes no longer work.');
      });
    });
  }
}

/** Binds the settings page; `cards` bind the other factors' cards, in this order, before the first load. */
export function initEnroll(cards: ((page: EnrollPage) => void)[]): void {
  const page = new EnrollPage();
  page.bindSecrets();
  page.bindTotp();
  page.bindBackupCodes();
  for (const bind of cards) bind(page);
  page.loadMe();
}
