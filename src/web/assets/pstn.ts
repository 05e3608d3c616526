/**
 * The phone factor on the pages (docs/signin.md, "Phone"): the sign-in form (pick a phone, send
 * a code, type it) and the security-settings card (add a number, verify it, remove it).
 * Markup: src/web/pstn.ts.
 */
import { api, explain } from './api.js';
import { $, alertBox, find, show } from './dom.js';
import type { EnrollPage } from './enroll.js';
import type { SigninFlow } from './signin.js';

interface Phone {
  ID: string;
  Number: string;
  Mode: string;
  Verified?: boolean;
}

/** The sign-in form's list of verified phones, loaded once, when the factor is first chosen. */
export function pstnLoad(): void {
  const sel = find('pstn-device') as HTMLSelectElement | null;
  if (!sel || sel.options.length) return;
  api<Phone[]>('GET', '/auth/pstn').then((r) => {
    if (r.status !== 200 || !r.data) return;
    sel.textContent = '';
    for (const d of r.data.filter((p) => p.Verified)) {
      const o = document.createElement('option');
      o.value = d.ID;
      o.textContent = (d.Mode === 'voice' ? 'Call ' : 'Text ') + d.Number;
      sel.appendChild(o);
    }
  });
}

export function initPstnSignin(flow: SigninFlow): void {
  const f = find('f-pstn') as HTMLFormElement | null;
  if (!f) return;
  const device = () => $<HTMLSelectElement>('pstn-device').value;
  $('pstn-send').addEventListener('click', () => {
    const id = device();
    if (!id) return;
    api('POST', `/auth/pstn/${encodeURIComponent(id)}/start`, { form: { intent: flow.page.intent } }).then(
      (r) => {
        if (r.status !== 204) {
          alertBox('error', explain(r));
          return;
        }
        alertBox('', '');
        $('pstn-sent').textContent = 'Code sent. It works for 5 minutes.';
        $('pstn-code').focus();
      },
    );
  });
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = device();
    api('POST', `/auth/pstn/${encodeURIComponent(id)}/finish`, {
      form: { intent: flow.page.intent, code: $<HTMLInputElement>('pstn-code').value },
    }).then((r) => {
      if (r.status === 204) {
        alertBox('', '');
        f.reset();
        $('pstn-sent').textContent = '';
        return flow.render();
      }
      alertBox('error', explain(r));
      return undefined;
    });
  });
}

function phoneItem(page: EnrollPage, d: Phone, reload: () => void): HTMLLIElement {
  const li = document.createElement('li');
  li.textContent = `${d.Number} · ${d.Mode === 'voice' ? 'voice call' : 'text message'}${d.Verified ? '' : ' · not verified '}`;
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'danger small';
  b.textContent = 'Remove';
  b.setAttribute('aria-label', `Remove ${d.Number}`);
  b.addEventListener('click', () => {
    api('DELETE', `/auth/enroll/pstn/${encodeURIComponent(d.ID)}`).then((x) => {
      if (page.done(x, 'Phone removed.') !== null) reload();
    });
  });
  li.appendChild(b);
  return li;
}

export function initPstnEnroll(page: EnrollPage): void {
  if (!find('e-pstn')) return;
  let pending = '';
  const load = (): Promise<void> =>
    api<Phone[]>('GET', '/auth/enroll/pstn').then((r) => {
      if (r.status !== 200 || !r.data) return;
      const ul = $('pstn-list');
      ul.textContent = '';
      let verified = 0;
      for (const d of r.data) {
        if (d.Verified) verified++;
        ul.appendChild(phoneItem(page, d, load));
      }
      $('st-pstn').textContent = verified ? 'set up' : 'not set up';
      $('st-pstn').className = `badge${verified ? ' on' : ''}`;
    });
  $('e-pstn').addEventListener('submit', (ev) => {
    ev.preventDefault();
    api<Phone>('POST', '/auth/enroll/pstn', {
      json: {
        Number: $<HTMLInputElement>('pstn-number').value,
        Mode: $<HTMLSelectElement>('pstn-mode').value,
      },
    }).then((r) => {
      if (r.status !== 201 || !r.data) {
        page.done(r, '');
        return;
      }
      pending = r.data.ID;
      $<HTMLFormElement>('e-pstn').reset();
      show($('e-pstn-verify'), true);
      alertBox('ok', `We sent a code to ${r.data.Number}. Type it below to verify the number.`);
      $('pstn-verify-code').focus();
      load();
    });
  });
  $('e-pstn-verify').addEventListener('submit', (ev) => {
    ev.preventDefault();
    api('POST', `/auth/enroll/pstn/${encodeURIComponent(pending)}/verify`, {
      json: { Code: $<HTMLInputElement>('pstn-verify-code').value },
    }).then((r) => {
      if (r.status === 204) {
        show($('e-pstn-verify'), false);
        $<HTMLFormElement>('e-pstn-verify').reset();
      }
      if (page.done(r, 'Phone verified.') !== null) load();
    });
  });
  load();
}
