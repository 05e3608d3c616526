/**
 * The phone factor on the pages (docs/signin.md, "Phone"): the sign-in form (pick a phone, send
 * a code, type it) and the security-settings card (add a number, verify it, remove it). Markup is
 * spliced into pages.ts and the script into the page script (appjs.ts), inside its scope.
 */

export const PSTN_SIGNIN_FORM = `
    <form id="f-pstn" class="factor" hidden>
      <label for="pstn-device">Phone</label>
      <select id="pstn-device"></select>
      <button type="button" id="pstn-send" class="secondary">Send a code</button>
      <p class="muted" id="pstn-sent" aria-live="polite"></p>
      <label for="pstn-code">Code from the text message or call</label>
      <input id="pstn-code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9 ]*" maxlength="7" required>
      <button type="submit" class="block">Verify code</button>
    </form>`;

export const PSTN_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-pstn">
    <h2 id="h-pstn">Phone <span id="st-pstn" class="badge"></span></h2>
    <p class="muted">A code by text message or voice call.</p>
    <ul id="pstn-list" class="plain"></ul>
    <form id="e-pstn">
      <label for="pstn-number">Phone number with country code</label>
      <input id="pstn-number" type="tel" autocomplete="tel" placeholder="+44 20 7946 0958" required>
      <label for="pstn-mode">Send codes by</label>
      <select id="pstn-mode"><option value="sms">Text message</option><option value="voice">Voice call</option></select>
      <button type="submit">Add phone</button>
    </form>
    <form id="e-pstn-verify" hidden>
      <label for="pstn-verify-code">Code sent to the new phone</label>
      <input id="pstn-verify-code" inputmode="numeric" autocomplete="one-time-code" maxlength="7" required>
      <button type="submit">Verify</button>
    </form>
  </section>`;

export const PSTN_JS = `
  // ---- phone (PSTN) ---------------------------------------------------------------------------
  function pstnLoad() {
    var sel = $('pstn-device');
    if (!sel || sel.options.length) return;
    api('GET', '/auth/pstn').then(function (r) {
      if (r.status !== 200) return;
      sel.textContent = '';
      r.data.filter(function (d) { return d.Verified; }).forEach(function (d) {
        var o = document.createElement('option');
        o.value = d.ID;
        o.textContent = (d.Mode === 'voice' ? 'Call ' : 'Text ') + d.Number;
        sel.appendChild(o);
      });
    });
  }
  function initPstnSignin() {
    var f = $('f-pstn');
    if (!f) return;
    $('pstn-send').addEventListener('click', function () {
      var id = $('pstn-device').value;
      if (!id) return;
      api('POST', '/auth/pstn/' + encodeURIComponent(id) + '/start', { form: { intent: intent } }).then(function (r) {
        if (r.status !== 204) { alertBox('error', explain(r)); return; }
        alertBox('', '');
        $('pstn-sent').textContent = 'Code sent. It works for 5 minutes.';
        $('pstn-code').focus();
      });
    });
    f.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var id = $('pstn-device').value;
      api('POST', '/auth/pstn/' + encodeURIComponent(id) + '/finish', { form: { intent: intent, code: $('pstn-code').value } }).then(function (r) {
        if (r.status === 204) { alertBox('', ''); f.reset(); $('pstn-sent').textContent = ''; return renderSignin(); }
        alertBox('error', explain(r));
      });
    });
  }
  function initPstnEnroll() {
    if (!$('e-pstn')) return;
    var pending = '';
    function load() {
      return api('GET', '/auth/enroll/pstn').then(function (r) {
        if (r.status !== 200) return;
        var ul = $('pstn-list');
        ul.textContent = '';
        var verified = 0;
        r.data.forEach(function (d) {
          if (d.Verified) verified++;
          var li = document.createElement('li');
          li.textContent = d.Number + ' · ' + (d.Mode === 'voice' ? 'voice call' : 'text message') + (d.Verified ? '' : ' · not verified ');
          var b = document.createElement('button');
          b.type = 'button';
          b.className = 'danger small';
          b.textContent = 'Remove';
          b.setAttribute('aria-label', 'Remove ' + d.Number);
          b.addEventListener('click', function () {
            api('DELETE', '/auth/enroll/pstn/' + encodeURIComponent(d.ID)).then(function (x) { if (done(x, 'Phone removed.') !== null) load(); });
          });
          li.appendChild(b);
          ul.appendChild(li);
        });
        $('st-pstn').textContent = verified ? 'set up' : 'not set up';
        $('st-pstn').className = 'badge' + (verified ? ' on' : '');
      });
    }
    $('e-pstn').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/enroll/pstn', { json: { Number: $('pstn-number').value, Mode: $('pstn-mode').value } }).then(function (r) {
        if (r.status !== 201) { done(r, ''); return; }
        pending = r.data.ID;
        $('e-pstn').reset();
        show($('e-pstn-verify'), true);
        alertBox('ok', 'We sent a code to ' + r.data.Number + '. Type it below to verify the number.');
        $('pstn-verify-code').focus();
        load();
      });
    });
    $('e-pstn-verify').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/enroll/pstn/' + encodeURIComponent(pending) + '/verify', { json: { Code: $('pstn-verify-code').value } }).then(function (r) {
        if (r.status === 204) { show($('e-pstn-verify'), false); $('e-pstn-verify').reset(); }
        if (done(r, 'Phone verified.') !== null) load();
      });
    });
    load();
  }
`;
