import { MOBILE_JS } from './mobileui.js';
import { OTP_JS } from './otp.js';
import { PSTN_JS } from './pstn.js';

/**
 * The sign-in pages' script (served as /signin/assets/app.js): plain JS, no build step, API calls only.
 * Over 400 lines because it is one file on purpose: the pages load exactly one script, allowed by
 * the CSP as 'self', with no build step to join parts; it is split by page (sections below).
 */
export const APP_JS = String.raw`(function () {
  'use strict';
  var body = document.body;
  var page = body.getAttribute('data-page');
  var returnUrl = body.getAttribute('data-return') || '';
  var intent = body.getAttribute('data-intent') || '';
  // Whether the server found the person signed in when it drew the page (before any step here).
  var signedInAtLoad = body.getAttribute('data-signed-in') === 'yes';

  function $(id) { return document.getElementById(id); }
  function show(el, on) { if (el) el.hidden = !on; }

  function alertBox(kind, text) {
    var box = $('alert');
    if (!box) return;
    box.className = 'alert ' + kind;
    box.textContent = text;
    box.hidden = !text;
    if (text) box.focus();
  }

  // Every call goes through the API with the session cookie; the header satisfies the CSRF check.
  function api(method, path, opts) {
    opts = opts || {};
    var headers = { 'X-Requested-With': 'gatehouse', Accept: 'application/json' };
    var bodyText;
    if (opts.form) {
      var p = new URLSearchParams();
      Object.keys(opts.form).forEach(function (k) { if (opts.form[k] !== '') p.append(k, opts.form[k]); });
      bodyText = p.toString();
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
    } else if (opts.json !== undefined) {
      bodyText = JSON.stringify(opts.json);
      headers['Content-Type'] = 'application/json';
    }
    return fetch(path, { method: method, headers: headers, body: bodyText, credentials: 'same-origin' }).then(function (res) {
      return res.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        return { status: res.status, data: data, headers: res.headers, text: text };
      });
    });
  }

  // The top bar and other "signed in / signed out" parts (data-when="in" | "out"), kept current.
  function setSignedIn(on) {
    body.setAttribute('data-signed-in', on ? 'yes' : 'no');
    Array.prototype.forEach.call(document.querySelectorAll('[data-when]'), function (el) {
      el.hidden = (el.getAttribute('data-when') === 'in') !== on;
    });
  }
  // Signed in means what the server means when it draws the page: the tenant's read level, no intent.
  function refreshSignedIn() {
    return api('POST', '/auth').then(function (r) { setSignedIn(!!(r.data && r.data.Authorized)); });
  }

  function explain(r) {
    if (r.status === 429) {
      var when = r.headers.get('X-Next-Attempt');
      return 'Too many attempts. Try again after ' + (when ? new Date(when).toLocaleTimeString() : 'a while') + '.';
    }
    if (r.status === 403 && r.data && r.data.Code === 'Incorrect Credential') return 'That is not correct. Please try again.';
    if (r.data && r.data.Code === 'Account Missing') return 'There is no account with this e-mail address.';
    return (r.data && r.data.Message) || ('Request failed (' + r.status + ').');
  }

  // ---- sign-in ---------------------------------------------------------------------------------
  var FACTOR_FORMS = { password: 'f-password', pin: 'f-pin', totp: 'f-totp', backup: 'f-backup', otp: 'f-otp', pstn: 'f-pstn', mobile: 'f-mobile' };
  var KIND = { password: 'knowledge', pin: 'knowledge', totp: 'possession', backup: 'possession', activation_code: 'invitation', otp: 'possession', pstn: 'possession', mobile: 'possession' };
  var LABEL = { password: 'password', pin: 'PIN', totp: 'authenticator app', backup: 'a backup code', activation_code: 'activation code', otp: 'an e-mail link', pstn: 'a code to your phone', mobile: 'a request to your phone app' };
  var ORDER = ['password', 'totp', 'mobile', 'pin', 'backup', 'otp', 'pstn'];
  // Security keys (webauthn.js): one choice for the three proofs a key can give (u2f, u2f_uv, u2f_up).
  FACTOR_FORMS.u2f = 'f-u2f'; KIND.u2f = 'hardware'; KIND.u2f_uv = 'verified'; KIND.u2f_up = 'possession';
  LABEL.u2f = LABEL.u2f_uv = LABEL.u2f_up = 'security key'; ORDER.unshift('u2f');
  function keyChoice(list) {
    return list.map(function (f) { return f.indexOf('u2f') === 0 ? 'u2f' : f; }).filter(function (f, i, a) { return a.indexOf(f) === i; });
  }
  // What a person proved, in their words (for "You signed in with …").
  var PROOF = { password: 'your password', pin: 'your PIN', totp: 'your authenticator app', backup: 'a backup code', activation_code: 'your activation code',
    otp: 'a link sent to your e-mail', pstn: 'a code sent to your phone', mobile: 'your phone', u2f: 'your security key or passkey', vouch: 'a colleague vouching for you' };
  PROOF.u2f_uv = PROOF.u2f_up = PROOF.u2f;
  PROOF.oauth2rp = 'your identity provider';
  function proofs(list) {
    // Never a factor's internal name: a factor without words here is "another way of signing in".
    var words = list.map(function (f) { return PROOF[f] || LABEL[f] || 'another way of signing in'; });
    return words.length < 2 ? words.join('') : words.slice(0, -1).join(', ') + ' and ' + words[words.length - 1];
  }
  function heading(text) {
    $('h-signin').textContent = text;
    document.title = text + ' · ' + document.title.split(' · ').slice(1).join(' · ');
  }
  var chosen = '';
  var askedLocation = false;
  var locationAnswer = '';

  function authState() {
    return api('POST', '/auth', { form: { intent: intent } }).then(function (r) {
      if (r.status === 400 && intent) { intent = ''; return authState(); }
      return r.data;
    });
  }

  function finish(st) {
    var next = st.Active ? Promise.resolve(null) : api('POST', '/auth/activate');
    return next.then(function (r) {
      if (r && r.status === 403) {
        show($('step-factors'), true);
        Object.keys(FACTOR_FORMS).forEach(function (k) { show($(FACTOR_FORMS[k]), false); });
        show($('f-activation'), true);
        alertBox('error', 'Your account needs an activation code.');
        return;
      }
      if (returnUrl) { window.location.assign(returnUrl); return; }
      show($('step-email'), false);
      show($('step-factors'), false);
      show($('step-done'), true);
      heading('You are signed in');
      show($('lead'), false);
      setSignedIn(true);
      $('done-who').textContent = st.Email;
      $('done-how').textContent = st.Proven.length ? 'You proved who you are with ' + proofs(st.Proven) + '.' : '';
    });
  }

  // With an intent, Authorized answers for the intent: whether the person is signed in is asked apart.
  function withSignedIn(st) {
    if (!st || !intent || !st.UserID) return Promise.resolve([st, !!(st && st.Authorized)]);
    return api('POST', '/auth').then(function (r) { return [st, !!(r.data && r.data.Authorized)]; });
  }

  function renderSignin() {
    return authState().then(withSignedIn).then(function (both) {
      var st = both[0];
      var signed = both[1];
      if (!st) { alertBox('error', 'The service did not answer.'); return; }
      setSignedIn(signed);
      // Signed in, and sent here by a refused request (an intent) or already signed in on arrival:
      // a step-up, not a new sign-in.
      var stepUp = signed && (intent !== '' || signedInAtLoad);
      heading(stepUp ? 'Confirm it\u2019s you' : 'Sign in');
      show($('lead'), true);
      if (!st.UserID) {
        show($('step-email'), true); show($('step-factors'), false); show($('step-done'), false);
        $('email').focus();
        if (window.gatehouseWebAuthn) window.gatehouseWebAuthn.emailStep();
        return;
      }
      // Location policy (docs/signin.md): the level needs a location inside the tenant's regions.
      if (st.LocationRequired && !askedLocation && navigator.geolocation) {
        askedLocation = true;
        navigator.geolocation.getCurrentPosition(function (pos) {
          api('POST', '/auth/location', { form: { lat: String(pos.coords.latitude), long: String(pos.coords.longitude) } }).then(function () { locationAnswer = 'outside'; return renderSignin(); });
        }, function () { locationAnswer = 'refused'; renderSignin(); });
      } else if (st.LocationRequired && locationAnswer) {
        alertBox('error', locationAnswer === 'refused'
          ? 'Your location is needed for full access; the browser did not give it.'
          : 'Full access is possible only from one of the allowed locations.');
      }
      var target = Math.max(st.RequiredLevel, st.ReachableLevel);
      if (st.Authorized && st.IntegrityLevel >= target) return finish(st);
      show($('step-email'), false); show($('step-done'), false); show($('step-factors'), true);
      $('who-email').textContent = st.Email;
      $('who-label').textContent = stepUp ? 'Signed in as' : 'Signing in as';
      // One factor at a time: prefer one of a kind not proven yet (that is what raises the level).
      var provenKinds = st.Proven.map(function (f) { return KIND[f]; });
      var ordered = ORDER.filter(function (f) { return keyChoice(st.Factors).indexOf(f) >= 0; });
      var useful = ordered.filter(function (f) { return provenKinds.indexOf(KIND[f]) < 0; });
      var choices = useful.length ? useful : ordered;
      if (choices.indexOf(chosen) < 0) chosen = choices[0] || '';
      var first = null;
      Object.keys(FACTOR_FORMS).forEach(function (k) {
        var on = k === chosen;
        show($(FACTOR_FORMS[k]), on);
        if (on) first = $(FACTOR_FORMS[k]).querySelector('input');
      });
      var others = $('other-ways');
      others.textContent = '';
      choices.filter(function (f) { return f !== chosen; }).forEach(function (f) {
        var b = document.createElement('button');
        b.type = 'button';
        b.className = 'secondary';
        b.textContent = 'Use ' + LABEL[f] + ' instead';
        b.addEventListener('click', function () { chosen = f; renderSignin(); });
        others.appendChild(b);
      });
      show($('f-activation'), false);
      if (chosen === 'pstn') pstnLoad();
      show($('no-factor'), st.Factors.length === 0 && !st.LocationRequired);
      $('progress').textContent = st.Proven.length
        ? 'You proved ' + proofs(st.Proven) + '. One more step is needed' + (stepUp ? ' for what you asked to do.' : ' to sign in.')
          + (st.Reason ? ' ' + st.Reason : '')
        : '';
      if (first) first.focus();
    });
  }

  function bindStep(formId, path, fieldMap) {
    var f = $(formId);
    if (!f) return;
    f.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var form = { intent: intent };
      Object.keys(fieldMap).forEach(function (k) { form[k] = $(fieldMap[k]).value; });
      api('POST', path, { form: form }).then(function (r) {
        if (r.status === 204) {
          alertBox('', '');
          f.reset();
          return renderSignin();
        }
        alertBox('error', explain(r));
        // A wrong secret is not left in the field to be corrected: type it again (the e-mail stays).
        if (formId !== 'f-email') {
          f.reset();
          var input = f.querySelector('input');
          if (input) input.focus();
        }
      });
    });
  }

  function initSignin() {
    bindStep('f-email', '/auth/email', { email: 'email' });
    bindStep('f-password', '/auth/password', { password: 'password' });
    bindStep('f-pin', '/auth/pin', { code: 'pin' });
    bindStep('f-totp', '/auth/totp', { code: 'totp' });
    bindStep('f-backup', '/auth/backup', { code: 'backup' });
    bindStep('f-activation', '/auth/activation_code', { code: 'activation' });
    initOtpSignin();
    initPstnSignin();
    initMobileSignin();
    $('not-me').addEventListener('click', function () {
      api('POST', '/auth/signout').then(function () { alertBox('', ''); return renderSignin(); });
    });
    renderSignin();
  }

  // ---- enrollment ------------------------------------------------------------------------------
  function loadMe() {
    return api('GET', '/users/me').then(function (r) {
      if (r.status === 401) {
        var to = '/signin?return=' + encodeURIComponent('/signin/enroll');
        if (r.data && r.data.Intent) to += '&intent=' + encodeURIComponent(r.data.Intent);
        window.location.assign(to);
        return null;
      }
      var u = r.data;
      [['HavePassword', 'st-password'], ['HavePIN', 'st-pin'], ['HaveTOTPSecret', 'st-totp']].forEach(function (p) {
        var el = $(p[1]);
        el.textContent = u[p[0]] ? 'set up' : 'not set up';
        el.className = 'badge' + (u[p[0]] ? ' on' : '');
      });
      $('enroll-who').textContent = u.Email || u.UserName || u.ID;
      show($('totp-remove'), !!u.HaveTOTPSecret);
      // Once set up, the buttons say what they now do: change, replace.
      $('totp-start').textContent = u.HaveTOTPSecret ? 'Replace the authenticator app' : 'Set up an authenticator app';
      $('e-password').querySelector('button').textContent = u.HavePassword ? 'Change password' : 'Save password';
      $('e-pin').querySelector('button').textContent = u.HavePIN ? 'Change PIN' : 'Save PIN';
      replacingTotp = !!u.HaveTOTPSecret;
      setSignedIn(true);
      // Changes need the level this person's sign-in methods reach: say so before they type.
      api('POST', '/auth').then(function (a) {
        var st = a.data;
        show($('enroll-stepup'), !!(st && st.IntegrityLevel < st.ReachableLevel));
      });
      return u;
    });
  }

  function done(r, okText) {
    if (r.status === 204 || r.status === 200) { alertBox('ok', okText); return loadMe(); }
    if (r.status === 401 && r.data && r.data.Intent) {
      window.location.assign('/signin?return=' + encodeURIComponent('/signin/enroll') + '&intent=' + encodeURIComponent(r.data.Intent));
      return null;
    }
    alertBox('error', explain(r));
    return null;
  }

  var replacingTotp = false;
  // Back to the card's buttons; loadMe() then decides whether Remove shows.
  function closeTotpSetup() {
    show($('totp-setup'), false);
    show($('totp-replace-note'), false);
    show($('totp-start'), true);
    show($('totp-remove'), replacingTotp);
    $('e-totp').reset();
  }

  function initEnroll() {
    $('e-password').addEventListener('submit', function (ev) {
      ev.preventDefault();
      if ($('new-password').value !== $('new-password2').value) { alertBox('error', 'The two passwords differ.'); return; }
      api('PUT', '/auth/enroll/password', { json: { Password: $('new-password').value } }).then(function (r) {
        if (r.status === 204) $('e-password').reset();
        done(r, 'Password saved.');
      });
    });
    $('e-pin').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('PUT', '/auth/enroll/pin', { json: { PIN: $('new-pin').value } }).then(function (r) {
        if (r.status === 204) $('e-pin').reset();
        done(r, 'PIN saved.');
      });
    });
    $('totp-start').addEventListener('click', function () {
      api('POST', '/auth/enroll/totp', { json: {} }).then(function (r) {
        if (r.status !== 200) { done(r, ''); return; }
        $('totp-qr').src = r.data.QRCode;
        $('totp-secret').textContent = r.data.Secret;
        show($('totp-replace-note'), replacingTotp);
        show($('totp-start'), false);
        show($('totp-remove'), false);
        show($('totp-setup'), true);
        $('totp-code').focus();
      });
    });
    $('e-totp').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/enroll/totp/confirm', { json: { Code: $('totp-code').value } }).then(function (r) {
        if (r.status === 204) { closeTotpSetup(); }
        done(r, 'Authenticator app set up.');
      });
    });
    $('totp-cancel').addEventListener('click', closeTotpSetup);
    $('totp-remove').addEventListener('click', function () {
      // Removing a way to sign in is not undone by another click: ask first.
      if (!window.confirm('Remove the authenticator app? Its codes will no longer sign you in.')) return;
      api('DELETE', '/auth/enroll/totp').then(function (r) { done(r, 'Authenticator app removed.'); });
    });
    $('backup-gen').addEventListener('click', function () {
      api('POST', '/auth/enroll/backup', { json: {} }).then(function (r) {
        if (r.status !== 200) { done(r, ''); return; }
        var list = $('backup-codes');
        list.textContent = '';
        r.data.Codes.forEach(function (c) { var li = document.createElement('li'); li.textContent = c; list.appendChild(li); });
        show($('backup-out'), true);
        alertBox('ok', 'New backup codes generated. Each works once; earlier codes no longer work.');
      });
    });
    initOtpEnroll();
    initPstnEnroll();
    initMobileEnroll();
    loadMe();
  }

  // ---- sign-out --------------------------------------------------------------------------------
  function initSignout() {
    $('signout').addEventListener('click', function () {
      api('POST', '/auth/signout').then(function (r) {
        if (r.status === 204) { setSignedIn(false); $('not-signed-in').hidden = true; alertBox('ok', 'You are signed out.'); }
        else alertBox('error', explain(r));
      });
    });
  }

  // ---- /debug: API explorer with the browser's session ------------------------------------------
  // A request refused with 401 and an intent offers a sign-in (or step-up) that comes back to the
  // same request: it is kept for the trip in this tab's sessionStorage (which no other site can
  // write) for at most RESUME_MS, read once on return (?resume=1), and sent again.
  var RESUME_KEY = 'gatehouse.debug.resume';
  var RESUME_MS = 10 * 60 * 1000;
  var lastSent = null;

  function offerStepUp(data) {
    var box = $('d-stepup');
    if (!data || typeof data.Intent !== 'string' || !data.Intent) { show(box, false); return; }
    var stepUp = data.Code === 'Insufficient Integrity';
    $('d-stepup-why').textContent = stepUp
      ? 'This request needs you to confirm who you are again, more strongly than when you signed in.'
      : 'This request needs you to be signed in.';
    var link = $('d-stepup-link');
    link.textContent = stepUp ? 'Confirm it\u2019s you and send it again' : 'Sign in and send it again';
    link.href = '/signin?return=' + encodeURIComponent('/signin/debug?resume=1') + '&intent=' + encodeURIComponent(data.Intent);
    var request = lastSent;
    link.onclick = function () {
      try { sessionStorage.setItem(RESUME_KEY, JSON.stringify({ at: Date.now(), request: request })); } catch (e) { /* storage off: the link still signs in */ }
    };
    show(box, true);
  }

  function resumeDebug() {
    if (!/(^|[?&])resume=1(&|$)/.test(window.location.search.slice(1))) return;
    history.replaceState(null, '', window.location.pathname);
    var saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(RESUME_KEY) || 'null'); sessionStorage.removeItem(RESUME_KEY); } catch (e) { saved = null; }
    if (!saved || !saved.request || typeof saved.at !== 'number' || Date.now() - saved.at > RESUME_MS || Date.now() < saved.at) return;
    var q = saved.request;
    $('d-method').value = q.method; $('d-path').value = q.path; $('d-headers').value = q.headers; $('d-body').value = q.body;
    $('d-form').requestSubmit();
  }

  function initDebug() {
    $('d-form').addEventListener('submit', function (ev) {
      ev.preventDefault();
      lastSent = { method: $('d-method').value, path: $('d-path').value, headers: $('d-headers').value, body: $('d-body').value };
      var method = $('d-method').value;
      var path = $('d-path').value.trim();
      if (path.charAt(0) !== '/' || path.charAt(1) === '/') { alertBox('error', 'The path must start with a single /.'); return; }
      var headers = { 'X-Requested-With': 'gatehouse-debug' };
      var bad = null;
      $('d-headers').value.split('\n').forEach(function (line) {
        if (!line.trim()) return;
        var i = line.indexOf(':');
        if (i < 1) { bad = line; return; }
        headers[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      });
      if (bad) { alertBox('error', 'Header lines are "Name: value": ' + bad); return; }
      var bodyText = $('d-body').value;
      var init = { method: method, headers: headers, credentials: 'same-origin' };
      if (bodyText && method !== 'GET' && method !== 'HEAD') {
        init.body = bodyText;
        var hasType = Object.keys(headers).some(function (k) { return k.toLowerCase() === 'content-type'; });
        if (!hasType) headers['Content-Type'] = 'application/json';
      }
      alertBox('', '');
      var started = performance.now();
      fetch(path, init).then(function (res) {
        return res.text().then(function (text) {
          var ms = Math.round(performance.now() - started);
          var st = $('r-status');
          st.textContent = res.status + ' ' + res.statusText + '  (' + ms + ' ms)';
          st.className = 'status s' + String(res.status).charAt(0);
          var lines = [];
          res.headers.forEach(function (v, k) { lines.push(k + ': ' + v); });
          $('r-headers').textContent = lines.join('\n');
          var pretty = text;
          try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (e) {
            if (/json-lines/.test(res.headers.get('content-type') || '')) {
              pretty = text.split('\n').filter(Boolean).map(function (l) {
                try { return JSON.stringify(JSON.parse(l), null, 2); } catch (e2) { return l; }
              }).join('\n');
            }
          }
          $('r-body').textContent = pretty || '(empty body)';
          show($('d-result'), true);
          var data = null;
          try { data = JSON.parse(text); } catch (e3) { data = null; }
          offerStepUp(res.status === 401 ? data : null);
          // A 401 may mean the session ended meanwhile: the top bar asks the server rather than guess.
          if (res.status === 401) refreshSignedIn();
        });
      }, function (err) { alertBox('error', 'The request failed: ' + err.message); });
    });
    resumeDebug();
  }

${OTP_JS}
${PSTN_JS}
${MOBILE_JS}
  // Times the server wrote in UTC (<time data-local>), in the reader's own time zone.
  Array.prototype.forEach.call(document.querySelectorAll('time[data-local]'), function (t) {
    var d = new Date(t.getAttribute('datetime') || '');
    if (!isNaN(d.getTime())) t.textContent = d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
  });
  if (page === 'signin') initSignin();
  else if (page === 'enroll') initEnroll();
  else if (page === 'signout') initSignout();
  else if (page === 'debug') initDebug();
  else if (page === 'otp') initOtpLink();
  else if (page === 'mobile') initMobileApp();
})();
`;
