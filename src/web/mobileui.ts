/**
 * Mobile push on the pages (docs/signin.md, "Mobile push"): the sign-in form and its waiting state
 * (the number to type on the device), the settings card, the service's small web app at
 * /signin/mobile (its markup, service worker and manifest). Routes: mobile.ts.
 */

export const MOBILE_SIGNIN_FORM = `
    <form id="f-mobile" class="factor" hidden>
      <p class="muted">We send a sign-in request to your registered phones and browsers.</p>
      <button type="submit" class="block">Send a request to my phone</button>
    </form>
    <div id="mobile-wait" class="factor" hidden>
      <p class="muted">On your device, open the request and type this number:</p>
      <p class="match" id="mobile-number" aria-live="polite"></p>
      <p class="muted">This page continues by itself once you approve.</p>
      <button type="button" id="mobile-cancel" class="secondary">Use another way</button>
    </div>`;

export const MOBILE_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-mobile">
    <h2 id="h-mobile">Phone app <span id="st-mobile" class="badge"></span></h2>
    <p class="muted">Approve sign-ins from a phone or another browser with notifications.</p>
    <ul id="mobile-list" class="plain"></ul>
    <p><a href="/signin/mobile">Set up a device</a> (open this on the device)</p>
  </section>`;

export const MOBILE_MAIN = `
<section class="card" aria-labelledby="h-mobile-app">
  <h1 id="h-mobile-app">Sign-in approvals</h1>
  <div id="mobile-request" hidden>
    <p class="lead">Someone asked to sign in as <strong id="mreq-email"></strong>.</p>
    <dl class="facts">
      <dt>Browser</dt><dd id="mreq-browser"></dd>
      <dt>Network address</dt><dd id="mreq-address"></dd>
      <dt>Asked at</dt><dd id="mreq-time"></dd>
    </dl>
    <form id="mreq-form">
      <label for="mreq-number">Number shown on the sign-in page</label>
      <input id="mreq-number" inputmode="numeric" pattern="[0-9]*" maxlength="2" autocomplete="off" required>
      <div class="row">
        <button type="submit">Approve</button>
        <button type="button" id="mreq-deny" class="danger">Deny, this was not me</button>
      </div>
    </form>
  </div>
  <p id="mobile-result" hidden></p>
  <div id="mobile-setup">
    <p class="muted">Use this browser to approve sign-ins: it receives a notification for each request.</p>
    <label for="mobile-name">Name of this device</label>
    <input id="mobile-name" maxlength="80" autocomplete="off">
    <button type="button" id="mobile-register">Use this device for sign-in approvals</button>
  </div>
</section>`;

export const MOBILE_JS = `
  // ---- mobile push ----------------------------------------------------------------------------
  function initMobileSignin() {
    var f = $('f-mobile');
    if (!f) return;
    f.addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/mobile/start', { form: { intent: intent } }).then(function (r) {
        if (r.status !== 204) { alertBox('error', r.status === 400 ? 'No device is set up for sign-in approvals.' : explain(r)); return; }
        return api('GET', '/auth/mobile').then(function (p) {
          if (p.status !== 200) { alertBox('error', explain(p)); return; }
          alertBox('', '');
          show(f, false);
          show($('other-ways'), false);
          $('mobile-number').textContent = String(p.data.Number);
          waitForFactor('mobile', 'mobile-wait', Date.parse(p.data.ExpireTime) || Date.now() + 120000, 'The request was denied on your device.');
        });
      });
    });
    $('mobile-cancel').addEventListener('click', function () {
      stopWaiting('mobile-wait');
      show($('other-ways'), true);
      renderSignin();
    });
  }
  function initMobileEnroll() {
    if (!$('mobile-list')) return;
    function load() {
      api('GET', '/auth/enroll/mobile').then(function (r) {
        if (r.status !== 200) return;
        var ul = $('mobile-list');
        ul.textContent = '';
        r.data.forEach(function (d) {
          var li = document.createElement('li');
          li.textContent = d.Name + ' · since ' + new Date(d.CreateTime).toLocaleDateString();
          var b = document.createElement('button');
          b.type = 'button';
          b.className = 'danger';
          b.textContent = 'Remove';
          b.setAttribute('aria-label', 'Remove ' + d.Name);
          b.addEventListener('click', function () {
            api('DELETE', '/auth/enroll/mobile/' + encodeURIComponent(d.ID)).then(function (x) { if (done(x, 'Device removed.') !== null) load(); });
          });
          li.appendChild(b);
          ul.appendChild(li);
        });
        $('st-mobile').textContent = r.data.length ? 'set up' : 'not set up';
        $('st-mobile').className = 'badge' + (r.data.length ? ' on' : '');
      });
    }
    load();
  }
  function initMobileApp() {
    var token = '';
    function result(text, kind) {
      show($('mobile-request'), false);
      var p = $('mobile-result');
      p.className = 'alert ' + kind;
      p.textContent = text;
      show(p, true);
    }
    function request(t) {
      token = t;
      api('POST', '/auth/mobile/inspect', { form: { token: token } }).then(function (r) {
        if (r.status !== 200) { result(r.status === 403 ? 'This request is not valid any more: it was answered or it expired.' : explain(r), 'error'); return; }
        $('mreq-email').textContent = r.data.Email;
        $('mreq-browser').textContent = r.data.Device.Browser || 'unknown';
        $('mreq-address').textContent = r.data.Device.Address || 'unknown';
        $('mreq-time').textContent = new Date(r.data.RequestTime).toLocaleString();
        show($('mobile-result'), false);
        show($('mobile-setup'), false);
        show($('mobile-request'), true);
        $('mreq-number').focus();
      });
    }
    var fromLink = decodeURIComponent(location.hash.replace(/^#/, ''));
    if (fromLink) { history.replaceState(null, '', location.pathname); request(fromLink); }
    if ('serviceWorker' in navigator) {
      navigator.serviceWorker.addEventListener('message', function (ev) {
        if (ev.data && ev.data.Type === 'signin' && ev.data.Token) request(ev.data.Token);
      });
    }
    $('mreq-form').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/mobile/approve', { form: { token: token, number: $('mreq-number').value.trim() } }).then(function (r) {
        if (r.status === 204) result('Approved. The browser that asked is signed in now.', 'ok');
        else if (r.status === 403) result('Not approved: the number did not match, or the request is no longer valid. Start the sign-in again.', 'error');
        else result(explain(r), 'error');
      });
    });
    $('mreq-deny').addEventListener('click', function () {
      api('POST', '/auth/mobile/deny', { form: { token: token } }).then(function (r) {
        if (r.status === 204) result('Denied. That sign-in was stopped.', 'ok');
        else result(r.status === 403 ? 'This request is not valid any more.' : explain(r), 'error');
      });
    });
    $('mobile-name').value = /iPhone|iPad/.test(navigator.userAgent) ? 'iPhone' : /Android/.test(navigator.userAgent) ? 'Android phone' : 'This browser';
    $('mobile-register').addEventListener('click', function () {
      if (!('serviceWorker' in navigator) || !('PushManager' in window)) { alertBox('error', 'This browser cannot receive push notifications.'); return; }
      Notification.requestPermission().then(function (perm) {
        if (perm !== 'granted') throw new Error('Notifications are blocked for this site.');
        return Promise.all([navigator.serviceWorker.register('/signin/mobile-sw.js'), api('GET', '/auth/mobile/vapid')]);
      }).then(function (x) {
        var key = x[1].data.PublicKey.replace(/-/g, '+').replace(/_/g, '/');
        var raw = atob(key + '==='.slice((key.length + 3) % 4));
        var bytes = new Uint8Array(raw.length);
        for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
        return navigator.serviceWorker.ready.then(function (reg) {
          return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes });
        });
      }).then(function (sub) {
        return api('POST', '/auth/enroll/mobile', { json: { Name: $('mobile-name').value, Subscription: sub.toJSON() } });
      }).then(function (r) {
        if (r.status === 201) alertBox('ok', 'This device will receive sign-in requests.');
        else if (r.status === 401 && r.data && r.data.Intent) window.location.assign('/signin?return=' + encodeURIComponent('/signin/mobile') + '&intent=' + encodeURIComponent(r.data.Intent));
        else alertBox('error', explain(r));
      }).catch(function (e) { alertBox('error', 'This device could not be set up: ' + e.message); });
    });
  }
`;

/** The service worker: shows each pushed request as a notification; a tap opens the approval page. */
export const MOBILE_SW = `'use strict';
self.addEventListener('install', function () { self.skipWaiting(); });
self.addEventListener('activate', function (ev) { ev.waitUntil(self.clients.claim()); });
self.addEventListener('push', function (ev) {
  var d = {};
  try { d = ev.data ? ev.data.json() : {}; } catch (e) { d = {}; }
  if (d.Type !== 'signin' || !d.Token) return;
  ev.waitUntil(self.clients.matchAll({ type: 'window' }).then(function (list) {
    list.forEach(function (c) { c.postMessage(d); });
    return self.registration.showNotification('Sign-in to ' + (d.Service || 'Gatehouse'), {
      body: d.Email + ' from ' + d.Browser + ' (' + d.Address + '). Tap to answer.',
      tag: 'gatehouse-signin',
      requireInteraction: true,
      data: { token: d.Token }
    });
  }));
});
self.addEventListener('notificationclick', function (ev) {
  ev.notification.close();
  var url = '/signin/mobile#' + encodeURIComponent(ev.notification.data.token);
  ev.waitUntil(self.clients.openWindow(url));
});
`;

/** The web app's manifest: installable, opening on the approvals page. */
export const MOBILE_MANIFEST = JSON.stringify({
  name: 'Sign-in approvals',
  short_name: 'Approvals',
  start_url: '/signin/mobile',
  scope: '/signin/',
  display: 'standalone',
  background_color: '#f4f5f9',
  theme_color: '#3754d6',
  icons: [{ src: '/favicon.svg', sizes: 'any', type: 'image/svg+xml' }],
});
