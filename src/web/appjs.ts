/** The sign-in pages' script (served as /signin/assets/app.js): plain JS, no build step, API calls only. */
export const APP_JS = String.raw`(function () {
  'use strict';
  var body = document.body;
  var page = body.getAttribute('data-page');
  var returnUrl = body.getAttribute('data-return') || '';
  var intent = body.getAttribute('data-intent') || '';

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
  var FACTOR_FORMS = { password: 'f-password', pin: 'f-pin', totp: 'f-totp', backup: 'f-backup' };
  var KIND = { password: 'knowledge', pin: 'knowledge', totp: 'possession', backup: 'possession', activation_code: 'invitation' };
  var LABEL = { password: 'password', pin: 'PIN', totp: 'authenticator app', backup: 'a backup code', activation_code: 'activation code' };
  var ORDER = ['password', 'totp', 'pin', 'backup'];
  var chosen = '';

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
      $('done-who').textContent = st.Email;
      $('done-level').textContent = st.IntegrityLevelName + ' (level ' + st.IntegrityLevel + ')';
    });
  }

  function renderSignin() {
    return authState().then(function (st) {
      if (!st) { alertBox('error', 'The service did not answer.'); return; }
      if (!st.UserID) {
        show($('step-email'), true); show($('step-factors'), false); show($('step-done'), false);
        $('email').focus();
        return;
      }
      var target = Math.max(st.RequiredLevel, st.ReachableLevel);
      if (st.Authorized && st.IntegrityLevel >= target) return finish(st);
      show($('step-email'), false); show($('step-done'), false); show($('step-factors'), true);
      $('who-email').textContent = st.Email;
      // One factor at a time: prefer one of a kind not proven yet (that is what raises the level).
      var provenKinds = st.Proven.map(function (f) { return KIND[f]; });
      var ordered = ORDER.filter(function (f) { return st.Factors.indexOf(f) >= 0; });
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
      show($('no-factor'), st.Factors.length === 0);
      $('progress').textContent = 'Verified: ' + (st.Proven.length ? st.Proven.map(function (f) { return LABEL[f] || f; }).join(', ') : 'nothing yet') + '.';
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
        show($('totp-setup'), true);
        $('totp-code').focus();
      });
    });
    $('e-totp').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/enroll/totp/confirm', { json: { Code: $('totp-code').value } }).then(function (r) {
        if (r.status === 204) { show($('totp-setup'), false); $('e-totp').reset(); }
        done(r, 'Authenticator app set up.');
      });
    });
    $('totp-remove').addEventListener('click', function () {
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
    loadMe();
  }

  // ---- sign-out --------------------------------------------------------------------------------
  function initSignout() {
    $('signout').addEventListener('click', function () {
      api('POST', '/auth/signout').then(function (r) {
        if (r.status === 204) { show($('signout-form'), false); show($('signed-out'), true); alertBox('ok', 'You are signed out.'); }
        else alertBox('error', explain(r));
      });
    });
  }

  // ---- /debug: API explorer with the browser's session ------------------------------------------
  function initDebug() {
    $('d-form').addEventListener('submit', function (ev) {
      ev.preventDefault();
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
        });
      }, function (err) { alertBox('error', 'The request failed: ' + err.message); });
    });
  }

  if (page === 'signin') initSignin();
  else if (page === 'enroll') initEnroll();
  else if (page === 'signout') initSignout();
  else if (page === 'debug') initDebug();
})();
`;
