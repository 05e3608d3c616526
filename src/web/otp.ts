/**
 * The e-mail link on the pages (docs/signin.md, "E-mail links"): the sign-in form and its waiting
 * state, the security-settings card, and the page the link opens (/signin/otp). The markup is
 * spliced into pages.ts and the script into the one page script (appjs.ts), inside its scope.
 */

/** On the sign-in page, among the factor forms. */
export const OTP_SIGNIN_FORM = `
    <form id="f-otp" class="factor" hidden>
      <p class="muted">We send a sign-in link to your e-mail address. Open it on any device and approve this sign-in.</p>
      <button type="submit" class="block">E-mail me a sign-in link</button>
    </form>
    <div id="otp-wait" class="factor" hidden>
      <p class="alert ok" id="otp-sent" aria-live="polite"></p>
      <p class="muted">Open the link in the message and choose “Yes, sign in that browser”. This page continues by itself.</p>
      <button type="button" id="otp-cancel" class="secondary">Use another way</button>
    </div>`;

/** In the security settings grid. */
export const OTP_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-otp">
    <h2 id="h-otp">E-mail sign-in links <span id="st-otp" class="badge"></span></h2>
    <p class="muted">Sign in by approving a link sent to <span id="otp-addresses">your e-mail address</span>.</p>
    <button type="button" id="otp-on">Turn on</button>
    <button type="button" id="otp-off" class="danger" hidden>Turn off</button>
  </section>`;

/** The page a sign-in link opens. */
export const OTP_LINK_MAIN = `
<section class="card" aria-labelledby="h-otp-link">
  <h1 id="h-otp-link">Approve a sign-in?</h1>
  <div id="otp-request" hidden>
    <p class="lead">Someone asked to sign in as <strong id="otp-email"></strong>.</p>
    <dl class="facts">
      <dt>Browser</dt><dd id="otp-browser"></dd>
      <dt>Network address</dt><dd id="otp-address"></dd>
      <dt>Approximate location</dt><dd id="otp-location"></dd>
      <dt>Asked at</dt><dd id="otp-time"></dd>
    </dl>
    <p class="muted" id="otp-same" hidden>That is this browser.</p>
    <p class="muted">Approving signs in the browser that asked, not the device you are using now.</p>
    <div class="row">
      <button type="button" id="otp-approve">Yes, sign in that browser</button>
      <button type="button" id="otp-refuse" class="danger">This was not me</button>
    </div>
  </div>
  <p id="otp-done" hidden></p>
</section>`;

/** Script for the three: runs inside the page script's scope (api, $, show, alertBox, explain...). */
export const OTP_JS = `
  // ---- e-mail link ----------------------------------------------------------------------------
  // Follows this session's AuthResponse (event kind Auth) while an out-of-band factor is pending
  // (e-mail link, push), until it is proven or refused, or the request expires: every wait ends.
  var waitSocket = null;
  function stopWaiting(waitId) {
    if (waitSocket) { var ws = waitSocket; waitSocket = null; try { ws.close(); } catch (e) { /* closed */ } }
    show($(waitId), false);
  }
  function waitForFactor(factor, waitId, until, refusedText) {
    show($(waitId), true);
    if (Date.now() >= until) {
      stopWaiting(waitId);
      alertBox('error', 'The request has expired. Send another one.');
      return renderSignin();
    }
    var ws = new WebSocket(location.origin.replace(/^http/, 'ws') + '/events');
    waitSocket = ws;
    var raised = false;
    ws.onopen = function () { ws.send(JSON.stringify({ Kind: 'Auth' })); };
    ws.onmessage = function (ev) {
      var f = null;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f && f.StatusCode === 100) raised = true;
      if (f && f.Kind === 'Auth' && f.Item && f.Item.Proven && f.Item.Proven.indexOf(factor) >= 0) raised = true;
    };
    ws.onclose = function (ev) {
      if (waitSocket !== ws) return;
      waitSocket = null;
      if (raised || ev.code === 1000) { show($(waitId), false); alertBox('', ''); return renderSignin(); }
      if (ev.code === 4001) {
        show($(waitId), false);
        alertBox('error', refusedText);
        return renderSignin();
      }
      setTimeout(function () { if (!$(waitId).hidden) waitForFactor(factor, waitId, until, refusedText); }, 2000);
    };
  }
  function initOtpSignin() {
    var f = $('f-otp');
    if (!f) return;
    f.addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/otp/start', { form: { intent: intent } }).then(function (r) {
        if (r.status !== 200) { alertBox('error', explain(r)); return; }
        alertBox('', '');
        show(f, false);
        show($('other-ways'), false);
        $('otp-sent').textContent = 'We sent a sign-in link to ' + r.data.Email + '.';
        waitForFactor('otp', 'otp-wait', Date.parse(r.data.ExpireTime) || Date.now() + 600000, 'This sign-in was refused from the e-mail link.');
      });
    });
    $('otp-cancel').addEventListener('click', function () {
      stopWaiting('otp-wait');
      show($('other-ways'), true);
      renderSignin();
    });
  }

  function initOtpEnroll() {
    if (!$('otp-on')) return;
    function load() {
      return api('GET', '/auth/enroll/otp').then(function (r) {
        if (r.status !== 200) return;
        var on = !!r.data.Enabled;
        $('st-otp').textContent = on ? 'on' : 'off';
        $('st-otp').className = 'badge' + (on ? ' on' : '');
        if (r.data.Addresses && r.data.Addresses.length) $('otp-addresses').textContent = r.data.Addresses.join(', ');
        show($('otp-on'), !on);
        show($('otp-off'), on);
      });
    }
    $('otp-on').addEventListener('click', function () {
      api('PUT', '/auth/enroll/otp').then(function (r) { if (done(r, 'E-mail sign-in links are on.') !== null) load(); });
    });
    $('otp-off').addEventListener('click', function () {
      api('DELETE', '/auth/enroll/otp').then(function (r) { if (done(r, 'E-mail sign-in links are off.') !== null) load(); });
    });
    load();
  }

  function initOtpLink() {
    var token = decodeURIComponent(location.hash.replace(/^#/, ''));
    // Out of the address bar and history: the token is a secret.
    if (token) history.replaceState(null, '', location.pathname);
    function finished(text, kind) {
      show($('otp-request'), false);
      var p = $('otp-done');
      p.className = 'alert ' + kind;
      p.textContent = text;
      show(p, true);
    }
    if (!token) { finished('This page needs the link from the e-mail message.', 'error'); return; }
    api('POST', '/auth/otp/inspect', { form: { token: token } }).then(function (r) {
      if (r.status !== 200) {
        finished(r.status === 403 ? 'This link is not valid any more: it was used, it expired, or a newer one was sent.' : explain(r), 'error');
        return;
      }
      var d = r.data.Device || {};
      $('otp-email').textContent = r.data.Email;
      $('otp-browser').textContent = d.Browser || 'unknown';
      $('otp-address').textContent = d.Address || 'unknown';
      $('otp-location').textContent = d.Location ? ('near ' + d.Location.Latitude + ', ' + d.Location.Longitude) : 'not reported';
      $('otp-time').textContent = new Date(r.data.RequestTime).toLocaleString();
      show($('otp-same'), !!r.data.SameDevice);
      show($('otp-request'), true);
      $('otp-approve').focus();
    });
    $('otp-approve').addEventListener('click', function () {
      api('POST', '/auth/otp/finish', { form: { token: token } }).then(function (r) {
        if (r.status === 204) finished('Approved. The browser that asked is signed in now; this device was not signed in.', 'ok');
        else if (r.status === 409) finished('That sign-in has ended in the meantime. Nothing was approved.', 'error');
        else finished(r.status === 403 ? 'This link is not valid any more.' : explain(r), 'error');
      });
    });
    $('otp-refuse').addEventListener('click', function () {
      api('POST', '/auth/otp/refuse', { form: { token: token } }).then(function (r) {
        if (r.status === 204) finished('Refused. That sign-in was stopped. If you did not ask for it, someone knows your e-mail address: consider changing your password.', 'ok');
        else finished(r.status === 403 ? 'This link is not valid any more.' : explain(r), 'error');
      });
    });
  }
`;
