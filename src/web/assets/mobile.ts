/**
 * Mobile push on the pages (docs/signin.md, "Mobile push"): the sign-in form and its wait (the
 * number to type on the device), the settings card, and the approvals web app at /signin/mobile
 * (its service worker is mobile-sw.ts). Markup: src/web/mobileui.ts.
 */
import { api, errorOf, explain } from './api.js';
import { $, alertBox, find, show, signinFor } from './dom.js';
import type { EnrollPage } from './enroll.js';
import type { SigninFlow } from './signin.js';

export function initMobileSignin(flow: SigninFlow): void {
  const f = find('f-mobile');
  if (!f) return;
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    api('POST', '/auth/mobile/start', { form: { intent: flow.page.intent } }).then((r) => {
      if (r.status !== 204) {
        alertBox('error', r.status === 400 ? 'No device is set up for sign-in approvals.' : explain(r));
        return undefined;
      }
      return api<{ Number: number; ExpireTime: string }>('GET', '/auth/mobile').then((p) => {
        if (p.status !== 200 || !p.data) {
          alertBox('error', explain(p));
          return;
        }
        alertBox('', '');
        show(f, false);
        show($('other-ways'), false);
        $('mobile-number').textContent = String(p.data.Number);
        flow.wait.start(
          'mobile',
          'mobile-wait',
          Date.parse(p.data.ExpireTime) || Date.now() + 120000,
          'The request was denied on your device.',
        );
      });
    });
  });
  $('mobile-cancel').addEventListener('click', () => {
    flow.wait.stop('mobile-wait');
    show($('other-ways'), true);
    flow.render();
  });
}

interface Device {
  ID: string;
  Name: string;
  CreateTime: string;
}

export function initMobileEnroll(page: EnrollPage): void {
  if (!find('mobile-list')) return;
  const load = () => {
    api<Device[]>('GET', '/auth/enroll/mobile').then((r) => {
      if (r.status !== 200 || !r.data) return;
      const ul = $('mobile-list');
      ul.textContent = '';
      for (const d of r.data) {
        const li = document.createElement('li');
        li.textContent = `${d.Name} · since ${new Date(d.CreateTime).toLocaleDateString()}`;
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'danger';
        b.textContent = 'Remove';
        b.setAttribute('aria-label', `Remove ${d.Name}`);
        b.addEventListener('click', () => {
          api('DELETE', `/auth/enroll/mobile/${encodeURIComponent(d.ID)}`).then((x) => {
            if (page.done(x, 'Device removed.') !== null) load();
          });
        });
        li.appendChild(b);
        ul.appendChild(li);
      }
      $('st-mobile').textContent = r.data.length ? 'set up' : 'not set up';
      $('st-mobile').className = `badge${r.data.length ? ' on' : ''}`;
    });
  };
  load();
}

/** A pushed sign-in request, as POST /auth/mobile/inspect answers. */
interface MobileRequest {
  Email: string;
  RequestTime: string;
  Device: { Browser?: string; Address?: string };
}

/** The application server key (base64url) as the bytes PushManager.subscribe wants. */
function keyBytes(publicKey: string): Uint8Array<ArrayBuffer> {
  const key = publicKey.replace(/-/g, '+').replace(/_/g, '/');
  const raw = atob(key + '==='.slice((key.length + 3) % 4));
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

/** "Use this device": notifications allowed, the service worker registered, the subscription sent. */
function registerDevice(): void {
  if (!('serviceWorker' in navigator) || !('PushManager' in window)) {
    alertBox('error', 'This browser cannot receive push notifications.');
    return;
  }
  Notification.requestPermission()
    .then((perm) => {
      if (perm !== 'granted') throw new Error('Notifications are blocked for this site.');
      return Promise.all([
        navigator.serviceWorker.register('/signin/mobile-sw.js'),
        api<{ PublicKey: string }>('GET', '/auth/mobile/vapid'),
      ]);
    })
    .then((x) => {
      const bytes = keyBytes((x[1].data as { PublicKey: string }).PublicKey);
      return navigator.serviceWorker.ready.then((reg) =>
        reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes }),
      );
    })
    .then((sub) =>
      api('POST', '/auth/enroll/mobile', {
        json: { Name: $<HTMLInputElement>('mobile-name').value, Subscription: sub.toJSON() },
      }),
    )
    .then((r) => {
      const e = errorOf(r);
      if (r.status === 201) alertBox('ok', 'This device will receive sign-in requests.');
      else if (r.status === 401 && e && e.Intent)
        window.location.assign(signinFor('/signin/mobile', e.Intent));
      else alertBox('error', explain(r));
    })
    .catch((e: Error) => {
      alertBox('error', `This device could not be set up: ${e.message}`);
    });
}

/** The approvals web app (/signin/mobile): registers this browser, answers pushed requests. */
export function initMobileApp(): void {
  let token = '';
  const result = (text: string, kind: string) => {
    show($('mobile-request'), false);
    const p = $('mobile-result');
    p.className = `alert ${kind}`;
    p.textContent = text;
    show(p, true);
  };
  const request = (t: string) => {
    token = t;
    api<MobileRequest>('POST', '/auth/mobile/inspect', { form: { token } }).then((r) => {
      if (r.status !== 200 || !r.data) {
        result(
          r.status === 403
            ? 'This request is not valid any more: it was answered or it expired.'
            : explain(r),
          'error',
        );
        return;
      }
      $('mreq-email').textContent = r.data.Email;
      $('mreq-browser').textContent = r.data.Device.Browser || 'unknown';
      $('mreq-address').textContent = r.data.Device.Address || 'unknown';
      $('mreq-time').textContent = new Date(r.data.RequestTime).toLocaleString();
      show($('mobile-result'), false);
      show($('mobile-setup'), false);
      show($('mobile-request'), true);
      $('mreq-number').focus();
    });
  };
  const fromLink = decodeURIComponent(location.hash.replace(/^#/, ''));
  if (fromLink) {
    history.replaceState(null, '', location.pathname);
    request(fromLink);
  }
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.addEventListener(
      'message',
      (ev: MessageEvent<{ Type?: string; Token?: string }>) => {
        if (ev.data && ev.data.Type === 'signin' && ev.data.Token) request(ev.data.Token);
      },
    );
  }
  $('mreq-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    api('POST', '/auth/mobile/approve', {
      form: { token, number: $<HTMLInputElement>('mreq-number').value.trim() },
    }).then((r) => {
      if (r.status === 204) result('Approved. The browser that asked is signed in now.', 'ok');
      else if (r.status === 403)
        result(
          'Not approved: the number did not match, or the request is no longer valid. Start the sign-in again.',
          'error',
        );
      else result(explain(r), 'error');
    });
  });
  $('mreq-deny').addEventListener('click', () => {
    api('POST', '/auth/mobile/deny', { form: { token } }).then((r) => {
      if (r.status === 204) result('Denied. That sign-in was stopped.', 'ok');
      else result(r.status === 403 ? 'This request is not valid any more.' : explain(r), 'error');
    });
  });
  $<HTMLInputElement>('mobile-name').value = /iPhone|iPad/.test(navigator.userAgent)
    ? 'iPhone'
    : /Android/.test(navigator.userAgent)
      ? 'Android phone'
      : 'This browser';
  $('mobile-register').addEventListener('click', registerDevice);
}
