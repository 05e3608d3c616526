/**
 * The pages' WebAuthn script (served as /signin/assets/webauthn.js, before app.js): security keys
 * and passkeys on the sign-in page (the factor step, the "Sign in with a passkey" button, the
 * e-mail field's autofill through conditional mediation) and on the security-settings page (list,
 * add, remove). Plain JS, no build step; the options and answers travel as WebAuthn JSON with
 * base64url byte strings, converted here (no reliance on the newer parse*FromJSON helpers).
 */
export const WEBAUTHN_JS = String.raw`(function () {
  'use strict';
  var page = document.body.getAttribute('data-page');
  var intent = document.body.getAttribute('data-intent') || '';
  // data-passkeys="no": this configuration has no relying party (no sign-in URL with a host name).
  var offered = document.body.getAttribute('data-passkeys') !== 'no';
  var supported = !!(window.PublicKeyCredential && navigator.credentials) && offered;
  function $(id) { return document.getElementById(id); }

  function toBuf(s) {
    var b64 = s.replace(/-/g, '+').replace(/_/g, '/');
    while (b64.length % 4) b64 += '=';
    var bin = atob(b64);
    var out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out.buffer;
  }
  function toB64u(buf) {
    var bytes = new Uint8Array(buf);
    var bin = '';
    for (var i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function descriptors(list) {
    return (list || []).map(function (c) { return { type: 'public-key', id: toBuf(c.id), transports: c.transports }; });
  }

  function alertBox(kind, text) {
    var box = $('alert');
    if (!box) return;
    box.className = 'alert ' + kind;
    box.textContent = text;
    box.hidden = !text;
    if (text) box.focus();
  }

  function call(method, path, body, form) {
    var headers = { 'X-Requested-With': 'gatehouse', Accept: 'application/json' };
    var text;
    if (form) {
      var p = new URLSearchParams();
      Object.keys(form).forEach(function (k) { if (form[k]) p.append(k, form[k]); });
      text = p.toString();
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
    } else if (body !== undefined) {
      text = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    return fetch(path, { method: method, headers: headers, body: text, credentials: 'same-origin' }).then(function (res) {
      return res.text().then(function (t) {
        var data = null;
        try { data = t ? JSON.parse(t) : null; } catch (e) { data = null; }
        return { status: res.status, data: data, headers: res.headers };
      });
    });
  }

  function explain(r) {
    if (r.status === 429) {
      var when = r.headers.get('X-Next-Attempt');
      return 'Too many attempts. Try again after ' + (when ? new Date(when).toLocaleTimeString() : 'a while') + '.';
    }
    if (r.status === 403) return 'That security key or passkey was not accepted.';
    return (r.data && r.data.Message) || ('Request failed (' + r.status + ').');
  }

  function assertionJSON(cred) {
    var r = cred.response;
    return {
      id: cred.id, rawId: toB64u(cred.rawId), type: cred.type,
      response: {
        clientDataJSON: toB64u(r.clientDataJSON),
        authenticatorData: toB64u(r.authenticatorData),
        signature: toB64u(r.signature),
        userHandle: r.userHandle ? toB64u(r.userHandle) : undefined
      },
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {}
    };
  }

  // ---- sign-in -----------------------------------------------------------------------------------
  var pending = null; // the AbortController of the autofill (conditional) request, if one is waiting

  function stopAutofill() {
    if (pending) { pending.abort(); pending = null; }
  }

  /** start -> navigator.credentials.get -> finish; resolves true when signed in. */
  function signIn(mediation) {
    var controller = new AbortController();
    if (mediation === 'conditional') pending = controller;
    return call('POST', '/auth/u2f/start', undefined, { intent: intent }).then(function (r) {
      if (r.status !== 200) { if (mediation !== 'conditional') alertBox('error', explain(r)); return false; }
      var o = r.data;
      var publicKey = {
        challenge: toBuf(o.challenge), rpId: o.rpId, timeout: o.timeout,
        userVerification: o.userVerification, allowCredentials: descriptors(o.allowCredentials)
      };
      var req = { publicKey: publicKey, signal: controller.signal };
      if (mediation) req.mediation = mediation;
      return navigator.credentials.get(req).then(function (cred) {
        if (pending === controller) pending = null;
        var body = assertionJSON(cred);
        if (intent) body.intent = intent;
        return call('POST', '/auth/u2f/finish', body).then(function (f) {
          if (f.status === 200) { window.location.reload(); return true; }
          alertBox('error', explain(f));
          return false;
        });
      }, function (err) {
        if (err && err.name === 'AbortError') return false;
        if (mediation !== 'conditional') alertBox('error', 'The security key did not answer (' + (err && err.name) + ').');
        return false;
      });
    });
  }

  function autofill() {
    if (!supported || pending || !PublicKeyCredential.isConditionalMediationAvailable) return;
    PublicKeyCredential.isConditionalMediationAvailable().then(function (ok) { if (ok) signIn('conditional'); });
  }

  function initSignin() {
    var button = $('passkey-signin');
    if (button && supported) {
      button.hidden = false;
      button.addEventListener('click', function () { stopAutofill(); signIn(''); });
    }
    var form = $('f-u2f');
    if (form) form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      stopAutofill();
      // Why keys cannot work here is the operator's to fix (the log says how), not the person's.
      if (!offered) { alertBox('error', 'Security keys cannot be used on this site at the moment. Please choose another way to sign in.'); return; }
      if (!supported) { alertBox('error', 'This browser cannot use security keys.'); return; }
      signIn('');
    });
  }

  // ---- security settings ---------------------------------------------------------------------------
  function toSignin(r) {
    if (r.status === 401 && r.data && r.data.Intent) {
      window.location.assign('/signin?return=' + encodeURIComponent('/signin/enroll') + '&intent=' + encodeURIComponent(r.data.Intent));
      return true;
    }
    return false;
  }

  function listKeys() {
    return call('GET', '/auth/enroll/u2f').then(function (r) {
      if (r.status !== 200) return;
      var list = $('keys');
      list.textContent = '';
      var badge = $('st-u2f');
      badge.textContent = r.data.Credentials.length ? r.data.Credentials.length + ' registered' : 'not set up';
      badge.className = 'badge' + (r.data.Credentials.length ? ' on' : '');
      r.data.Credentials.forEach(function (c) {
        var li = document.createElement('li');
        var name = document.createElement('span');
        name.textContent = c.Name + (c.Passkey ? ' (passkey)' : '') + ' · added ' + new Date(c.CreateTime).toLocaleDateString() +
          (c.LastUsed ? ', last used ' + new Date(c.LastUsed).toLocaleDateString() : ', not used yet');
        var rm = document.createElement('button');
        rm.type = 'button';
        rm.className = 'danger';
        rm.textContent = 'Remove';
        rm.setAttribute('aria-label', 'Remove ' + c.Name);
        rm.addEventListener('click', function () {
          call('DELETE', '/auth/enroll/u2f/' + encodeURIComponent(c.ID)).then(function (d) {
            if (toSignin(d)) return;
            if (d.status === 204) { alertBox('ok', c.Name + ' removed.'); listKeys(); }
            else alertBox('error', explain(d));
          });
        });
        li.appendChild(name);
        li.appendChild(rm);
        list.appendChild(li);
      });
    });
  }

  function addKey(ev) {
    ev.preventDefault();
    if (!supported) { alertBox('error', 'This browser cannot use security keys.'); return; }
    var name = $('key-name').value;
    call('POST', '/auth/enroll/u2f', {}).then(function (r) {
      if (toSignin(r)) return;
      if (r.status !== 200) { alertBox('error', explain(r)); return; }
      var o = r.data;
      var publicKey = {
        rp: o.rp, challenge: toBuf(o.challenge), timeout: o.timeout, attestation: o.attestation,
        user: { id: toBuf(o.user.id), name: o.user.name, displayName: o.user.displayName },
        pubKeyCredParams: o.pubKeyCredParams, excludeCredentials: descriptors(o.excludeCredentials),
        authenticatorSelection: o.authenticatorSelection, extensions: o.extensions
      };
      return navigator.credentials.create({ publicKey: publicKey }).then(function (cred) {
        var resp = cred.response;
        var body = {
          Name: name,
          Credential: {
            id: cred.id, rawId: toB64u(cred.rawId), type: cred.type,
            response: {
              clientDataJSON: toB64u(resp.clientDataJSON),
              attestationObject: toB64u(resp.attestationObject),
              transports: resp.getTransports ? resp.getTransports() : []
            },
            clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {}
          }
        };
        return call('POST', '/auth/enroll/u2f/confirm', body).then(function (c) {
          if (toSignin(c)) return;
          if (c.status === 200) { $('e-u2f').reset(); alertBox('ok', c.data.Name + ' added.'); listKeys(); }
          else alertBox('error', explain(c));
        });
      }, function (err) {
        alertBox('error', 'The security key was not registered (' + (err && err.name) + ').');
      });
    });
  }

  function initEnroll() {
    var form = $('e-u2f');
    if (!form) return;
    form.addEventListener('submit', addKey);
    listKeys();
  }

  window.gatehouseWebAuthn = { emailStep: autofill };
  if (page === 'signin') initSignin();
  else if (page === 'enroll') initEnroll();
})();
`;
