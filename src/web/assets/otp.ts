/**
 * The e-mail link on the pages (docs/signin.md, "E-mail links"): the sign-in form and its wait,
 * the security-settings card, and the page the link opens (/signin/otp). Markup: src/web/otp.ts.
 */
import { api, explain } from './api.js';
import { $, alertBox, find, show } from './dom.js';
import type { EnrollPage } from './enroll.js';
import type { SigninFlow } from './signin.js';

export function initOtpSignin(flow: SigninFlow): void {
  const f = find('f-otp');
  if (!f) return;
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    api<{ Email: string; ExpireTime: string }>('POST', '/auth/otp/start', {
      form: { intent: flow.page.intent },
    }).then((r) => {
      if (r.status !== 200 || !r.data) {
        alertBox('error', explain(r));
        return;
      }
      alertBox('', '');
      show(f, false);
      show($('other-ways'), false);
      $('otp-sent').textContent = `We sent a sign-in link to ${r.data.Email}.`;
      flow.wait.start(
        'otp',
        'otp-wait',
        Date.parse(r.data.ExpireTime) || Date.now() + 600000,
        'This sign-in was refused from the e-mail link.',
      );
    });
  });
  $('otp-cancel').addEventListener('click', () => {
    flow.wait.stop('otp-wait');
    show($('other-ways'), true);
    flow.render();
  });
}

export function initOtpEnroll(page: EnrollPage): void {
  if (!find('otp-on')) return;
  const load = () =>
    api<{ Enabled?: boolean; Addresses?: string[] }>('GET', '/auth/enroll/otp').then((r) => {
      if (r.status !== 200 || !r.data) return;
      const on = !!r.data.Enabled;
      $('st-otp').textContent = on ? 'on' : 'off';
      $('st-otp').className = `badge${on ? ' on' : ''}`;
      if (r.data.Addresses?.length) $('otp-addresses').textContent = r.data.Addresses.join(', ');
      show($('otp-on'), !on);
      show($('otp-off'), on);
    });
  $('otp-on').addEventListener('click', () => {
    api('PUT', '/auth/enroll/otp').then((r) => {
      if (page.done(r, 'E-mail sign-in links are on.') !== null) load();
    });
  });
  $('otp-off').addEventListener('click', () => {
    api('DELETE', '/auth/enroll/otp').then((r) => {
      if (page.done(r, 'E-mail sign-in links are off.') !== null) load();
    });
  });
  load();
}

/** The sign-in request a link names, as POST /auth/otp/inspect answers. */
interface OtpRequest {
  Email: string;
  RequestTime: string;
  SameDevice?: boolean;
  Device?: { Browser?: string; Address?: string; Location?: { Latitude: number; Longitude: number } };
}

/** The page a sign-in link opens (/signin/otp#<token>): who asked, approve or refuse. */
export function initOtpLink(): void {
  const token = decodeURIComponent(location.hash.replace(/^#/, ''));
  // Out of the address bar and history: the token is a secret.
  if (token) history.replaceState(null, '', location.pathname);
  const finished = (text: string, kind: string) => {
    show($('otp-request'), false);
    const p = $('otp-done');
    p.className = `alert ${kind}`;
    p.textContent = text;
    show(p, true);
  };
  if (!token) {
    finished('This page needs the link from the e-mail message.', 'error');
    return;
  }
  api<OtpRequest>('POST', '/auth/otp/inspect', { form: { token } }).then((r) => {
    if (r.status !== 200 || !r.data) {
      finished(
        r.status === 403
          ? 'This link is not valid any more: it was used, it expired, or a newer one was sent.'
          : explain(r),
        'error',
      );
      return;
    }
    const d = r.data.Device || {};
    $('otp-email').textContent = r.data.Email;
    $('otp-browser').textContent = d.Browser || 'unknown';
    $('otp-address').textContent = d.Address || 'unknown';
    $('otp-location').textContent = d.Location
      ? `near ${d.Location.Latitude}, ${d.Location.Longitude}`
      : 'not reported';
    $('otp-time').textContent = new Date(r.data.RequestTime).toLocaleString();
    show($('otp-same'), !!r.data.SameDevice);
    show($('otp-request'), true);
    $('otp-approve').focus();
  });
  $('otp-approve').addEventListener('click', () => {
    api('POST', '/auth/otp/finish', { form: { token } }).then((r) => {
      if (r.status === 204)
        finished('Approved. The browser that asked is signed in now; this device was not signed in.', 'ok');
      else if (r.status === 409)
        finished('That sign-in has ended in the meantime. Nothing was approved.', 'error');
      else finished(r.status === 403 ? 'This link is not valid any more.' : explain(r), 'error');
    });
  });
  $('otp-refuse').addEventListener('click', () => {
    api('POST', '/auth/otp/refuse', { form: { token } }).then((r) => {
      if (r.status === 204)
        finished(
          'Refused. That sign-in was stopped. If you did not ask for it, someone knows your e-mail address: consider changing your password.',
          'ok',
        );
      else finished(r.status === 403 ? 'This link is not valid any more.' : explain(r), 'error');
    });
  });
}
