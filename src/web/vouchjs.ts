/** Script and style of the vouching pages (src/web/vouch.ts): plain JS, API calls only. */
export const VOUCH_CSS = `
.words { font-size: 1.6rem; font-weight: 700; letter-spacing: .02em; margin: .25rem 0 1rem; }
.video { width: 100%; aspect-ratio: 4 / 3; background: #0f1522; border-radius: 8px; display: block; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: 0; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; }
dl.facts dd.words { font-size: 1.25rem; margin: 0; }
.row button { flex: 0 1 auto; }
#v-preview, #f-preview, #f-current { max-width: 420px; margin: 0 auto; }
`;

export const VOUCH_JS = `(function () {
  'use strict';
  var body = document.body;
  var page = body.getAttribute('data-page');
  function $(id) { return document.getElementById(id); }
  function show(el, on) { if (el) el.hidden = !on; }
  function alertBox(kind, text) {
    var box = $('alert');
    box.className = 'alert ' + kind;
    box.textContent = text;
    box.hidden = !text;
    if (text) box.focus();
  }
  function api(method, path, form) {
    var headers = { 'X-Requested-With': 'gatehouse', Accept: 'application/json' };
    var data;
    if (form) {
      var p = new URLSearchParams();
      Object.keys(form).forEach(function (k) { if (form[k]) p.append(k, form[k]); });
      data = p.toString();
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
    }
    return fetch(path, { method: method, headers: headers, body: data, credentials: 'same-origin' }).then(function (res) {
      return res.text().then(function (t) {
        var j = null;
        try { j = t ? JSON.parse(t) : null; } catch (e) { j = null; }
        return { status: res.status, data: j };
      });
    });
  }
  function message(r) { return (r.data && r.data.Message) || ('The service answered ' + r.status + '.'); }
  function names(list) {
    return list.map(function (v) { return v.FullName ? v.FullName + ' (' + v.Email + ')' : v.Email; }).join(', ');
  }
  var LIMIT = 20 * 1024 * 1024;
  var MAX_SECONDS = 20;

  // Camera preview and MediaRecorder for the elements <p>-preview, -start, -stop, -status.
  function recorderUI(p, onBlob) {
    var ui = { stream: null, recorder: null };
    ui.open = function () {
      if (!navigator.mediaDevices || !window.MediaRecorder) {
        alertBox('error', 'This browser cannot record video here. Use another browser.');
        return;
      }
      navigator.mediaDevices.getUserMedia({ video: true, audio: true }).then(function (s) {
        ui.stream = s;
        var v = $(p + '-preview');
        v.srcObject = s;
        v.play().catch(function () {});
        $(p + '-status').textContent = 'Camera ready.';
      }, function (e) {
        alertBox('error', 'The camera could not be opened: ' + (e && e.name ? e.name : e) + '. Allow camera and microphone, then reload.');
      });
    };
    ui.close = function () {
      if (ui.stream) ui.stream.getTracks().forEach(function (t) { t.stop(); });
      ui.stream = null;
    };
    $(p + '-start').addEventListener('click', function () {
      if (!ui.stream) { alertBox('error', 'The camera is not ready yet.'); return; }
      var types = ['video/webm;codecs=vp8,opus', 'video/webm;codecs=vp9,opus', 'video/webm'];
      var type = types.filter(function (t) { return MediaRecorder.isTypeSupported(t); })[0];
      if (!type) { alertBox('error', 'This browser cannot record WebM video.'); return; }
      var chunks = [];
      var rec = new MediaRecorder(ui.stream, { mimeType: type, videoBitsPerSecond: 1000000 });
      ui.recorder = rec;
      rec.ondataavailable = function (e) { if (e.data && e.data.size) chunks.push(e.data); };
      rec.onstop = function () {
        $(p + '-start').disabled = false;
        var blob = new Blob(chunks, { type: 'video/webm' });
        if (blob.size > LIMIT) { alertBox('error', 'The recording is too long; record a shorter one.'); return; }
        $(p + '-status').textContent = 'Sending the video…';
        onBlob(blob);
      };
      rec.start(250);
      $(p + '-start').disabled = true;
      $(p + '-stop').disabled = false;
      $(p + '-status').textContent = 'Recording… say the words, then stop (at most ' + MAX_SECONDS + ' seconds).';
      setTimeout(function () { if (rec.state === 'recording') rec.stop(); }, MAX_SECONDS * 1000);
    });
    $(p + '-stop').addEventListener('click', function () {
      if (ui.recorder && ui.recorder.state === 'recording') ui.recorder.stop();
      $(p + '-stop').disabled = true;
    });
    return ui;
  }

  if (page === 'vouch-request') {
    var returnUrl = body.getAttribute('data-return') || '';
    var intent = body.getAttribute('data-intent') || '';
    var request = null, timer = null, cam = null;
    var stopCamera = function () { if (cam) cam.close(); };
    var finish = function (state) {
      stopCamera();
      alertBox('', '');
      show($('v-wait'), false);
      show($('v-record'), false);
      show($('v-done'), true);
      var ok = state === 'approved';
      $('h-done').textContent = ok ? 'Your colleague vouched for you' : 'The request ended';
      $('v-done-text').textContent = ok
        ? 'You are signed in. Set up a new authenticator now, so you do not need a vouch next time.'
        : state === 'rejected' ? 'Your colleague declined. Ask an administrator for help.'
        : state === 'expired' ? 'Nobody answered in time. You can ask again.'
        : 'You cancelled the request.';
      $('v-continue').setAttribute('href', ok ? (returnUrl || '/signin/enroll') : '/signin/vouch');
      $('v-continue').textContent = ok ? 'Continue' : 'Start again';
    };
    var poll = function () {
      if (!request) return;
      api('GET', '/auth/vouch/' + encodeURIComponent(request.ID)).then(function (r) {
        if (r.status !== 200) { alertBox('error', message(r)); return; }
        $('v-state').textContent = r.data.State;
        if (r.data.State !== 'pending') { finish(r.data.State); return; }
        if (Date.parse(r.data.ExpireTime) + 5000 > Date.now()) timer = setTimeout(poll, 2000);
      }, function () { timer = setTimeout(poll, 5000); });
    };
    var upload = function (blob) {
      fetch('/auth/vouch/' + encodeURIComponent(request.ID) + '/video', {
        method: 'POST', body: blob, credentials: 'same-origin',
        headers: { 'X-Requested-With': 'gatehouse', 'Content-Type': 'video/webm' },
      }).then(function (res) {
        if (res.status !== 204) {
          return res.json().then(function (j) { alertBox('error', j.Message || 'The video was refused.'); }, function () { alertBox('error', 'The video was refused (' + res.status + ').'); });
        }
        stopCamera();
        show($('v-record'), false);
        show($('v-wait'), true);
        alertBox('ok', 'Video sent. Ask a colleague to open the link below.');
        poll();
      });
    };
    $('v-ask').addEventListener('submit', function (ev) {
      ev.preventDefault();
      api('POST', '/auth/vouch', { intent: intent, reason: $('v-reason').value }).then(function (r) {
        if (r.status === 400 && r.data && r.data.Field === 'email') {
          location.href = '/signin?return=' + encodeURIComponent('/signin/vouch');
          return;
        }
        if (r.status !== 200) { alertBox('error', message(r)); return; }
        request = r.data;
        alertBox('', '');
        $('v-words').textContent = request.MagicWords.join(' · ');
        $('v-vouchers').textContent = names(request.Vouchers);
        var link = location.origin + request.VouchURL;
        $('v-link').textContent = link;
        $('v-link').setAttribute('href', link);
        $('v-expires').textContent = new Date(request.ExpireTime).toLocaleTimeString();
        show($('v-ask').parentNode, false);
        show($('v-record'), true);
        cam.open();
      });
    });
    cam = recorderUI('v', upload);
    $('v-cancel').addEventListener('click', function () {
      if (!request) return;
      clearTimeout(timer);
      api('DELETE', '/auth/vouch/' + encodeURIComponent(request.ID)).then(function (r) {
        if (r.status !== 200) { alertBox('error', message(r)); return; }
        finish('cancelled');
      });
    });
  }

  if (page === 'vouch-reference') {
    var words = (body.getAttribute('data-words') || '').split(',');
    var self = '/signin/vouch/reference';
    var userId = '';
    var stepUp = function (r) {
      location.href = '/signin?intent=' + encodeURIComponent(r.Intent) + '&return=' + encodeURIComponent(self);
    };
    var current = function () {
      var url = '/users/' + encodeURIComponent(userId) + '/reference-video';
      fetch(url, { method: 'HEAD', credentials: 'same-origin' }).then(function (res) {
        var have = res.status === 200;
        $('f-have').textContent = have
          ? 'You have a reference video (words: ' + (res.headers.get('X-Magic-Words') || '').split(',').join(', ') + ').'
          : 'You have no reference video yet.';
        show($('f-current'), have);
        if (have) $('f-current').setAttribute('src', url + '?v=' + Date.now());
      });
    };
    var ref = recorderUI('f', function (blob) {
      fetch('/users/' + encodeURIComponent(userId) + '/reference-video', {
        method: 'PUT', body: blob, credentials: 'same-origin',
        headers: { 'X-Requested-With': 'gatehouse', 'Content-Type': 'video/webm', 'X-Magic-Words': words.join(',') },
      }).then(function (res) {
        if (res.status === 204) {
          $('f-status').textContent = '';
          alertBox('ok', 'Your reference video is saved.');
          current();
          return;
        }
        return res.json().then(function (j) {
          if (res.status === 401 && j.Intent) { stepUp(j); return; }
          alertBox('error', j.Message || 'The video was refused.');
        });
      });
    });
    api('GET', '/users/me').then(function (r) {
      if (r.status === 401 && r.data && r.data.Intent) { stepUp(r.data); return; }
      if (r.status !== 200) { alertBox('error', message(r)); return; }
      userId = r.data.ID;
      current();
      ref.open();
    });
  }

  if (page === 'vouch-decide') {
    var id = body.getAttribute('data-id') || '';
    var here = '/signin/vouch/' + encodeURIComponent(id);
    var current = null;
    var render = function (v) {
      current = v;
      $('d-lead').textContent = v.State === 'pending'
        ? 'Check that this is really your colleague before you approve.'
        : 'This request is ' + v.State + '.';
      $('d-who').textContent = (v.User.FullName ? v.User.FullName + ' ' : '') + '<' + v.User.Email + '>';
      $('d-reason').textContent = v.Reason || '—';
      $('d-words').textContent = v.MagicWords.join(' · ');
      $('d-level').textContent = v.LevelName + ' (level ' + v.Level + ')';
      $('d-state').textContent = v.State;
      show($('d-facts'), true);
      var pending = v.State === 'pending';
      show($('d-videos'), pending);
      show($('d-actions'), pending && v.HaveVideo);
      if (pending) {
        $('d-ref').setAttribute('src', '/auth/vouch/' + encodeURIComponent(id) + '/reference-video');
        show($('d-novideo'), !v.HaveVideo);
        show($('d-new'), v.HaveVideo);
        if (v.HaveVideo) $('d-new').setAttribute('src', '/auth/vouch/' + encodeURIComponent(id) + '/video');
      }
    };
    var decide = function (what) {
      api('POST', '/auth/vouch/' + encodeURIComponent(id) + '/' + what, what === 'approve' ? { video: current.VideoID } : {}).then(function (r) {
        if (r.status === 401 && r.data && r.data.Intent) {
          location.href = '/signin?intent=' + encodeURIComponent(r.data.Intent) + '&return=' + encodeURIComponent(here);
          return;
        }
        if (r.status !== 200) { alertBox('error', message(r)); return; }
        render(r.data);
        alertBox('ok', r.data.State === 'approved' ? 'Thank you: you vouched for ' + r.data.User.Email + '.' : 'You declined the request.');
      });
    };
    api('GET', '/auth/vouch/' + encodeURIComponent(id)).then(function (r) {
      if (r.status !== 200) {
        $('d-lead').textContent = 'This request does not exist, has ended, or does not name you. ';
        var a = document.createElement('a');
        a.href = '/signin?return=' + encodeURIComponent(here);
        a.textContent = 'Sign in as the colleague it names';
        $('d-lead').appendChild(a);
        return;
      }
      render(r.data);
    });
    $('d-approve').addEventListener('click', function () { decide('approve'); });
    $('d-decline').addEventListener('click', function () { decide('decline'); });
  }
})();
`;
