/**
 * The sign-in pages' part of sign-in through other identity providers (docs/federation.md): one
 * button per provider on the sign-in page, "link" buttons and the links on the security settings
 * page, and their script (/signin/assets/federation.js; the pages' CSP allows only own scripts).
 */
import { esc } from '../core/html.js';

export interface ProviderButton {
  ID: string;
  Name: string;
}

/** Below the e-mail form: "or" and a button per provider. Empty when there is none. */
export function providerButtons(list: readonly ProviderButton[]): string {
  if (list.length === 0) return '';
  const buttons = list
    .map(
      (p) =>
        `<button type="button" class="secondary block provider" data-provider="${esc(p.ID)}">Continue with ${esc(p.Name)}</button>`,
    )
    .join('\n    ');
  return `
  <div id="providers" class="providers">
    <p class="or"><span>or</span></p>
    ${buttons}
  </div>
  <script src="/signin/assets/federation.js" defer></script>`;
}

/** A card for the security settings page: the user's links, and a button to link each provider. */
export function providerLinksCard(list: readonly ProviderButton[]): string {
  if (list.length === 0) return '';
  const buttons = list
    .map(
      (p) =>
        `<button type="button" class="secondary" data-provider="${esc(p.ID)}" data-link="true">Link ${esc(p.Name)}</button>`,
    )
    .join('\n    ');
  return `
  <section class="card" aria-labelledby="h-providers">
    <h2 id="h-providers">Sign-in providers</h2>
    <p class="muted">Accounts at other identity providers that may sign you in here.</p>
    <ul id="provider-links" class="links"></ul>
    <div class="row">
    ${buttons}
    </div>
  </section>
  <script src="/signin/assets/federation.js" defer></script>`;
}

/**
 * The script: a provider button asks the service to start the flow (POST /auth/oauth2rp/:appID,
 * with the page's return URL and intent) and sends the browser to the authorization URL it
 * answers; on the settings page it lists the links (GET /auth/oauth2rp/links) with a remove button.
 */
export const FEDERATION_JS = `'use strict';
(function () {
  var body = document.body;
  var names = {};
  function alertBox(text) {
    var a = document.getElementById('alert');
    if (!a) return;
    a.className = 'alert error';
    a.textContent = text;
    a.hidden = false;
    a.focus();
  }
  function call(method, path, form) {
    var opts = { method: method, credentials: 'same-origin',
      headers: { 'X-Requested-With': 'gatehouse', Accept: 'application/json' } };
    if (form) {
      opts.headers['Content-Type'] = 'application/x-www-form-urlencoded';
      opts.body = form.toString();
    }
    return fetch(path, opts).then(function (r) {
      if (r.status === 204) return { status: 204, data: null };
      return r.json().then(function (d) { return { status: r.status, data: d }; },
        function () { return { status: r.status, data: null }; });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll('button[data-provider]'), function (b) {
    names[b.getAttribute('data-provider')] = b.textContent.replace(/^(Continue with|Link) /, '');
    b.addEventListener('click', function () {
      var form = new URLSearchParams();
      var link = b.getAttribute('data-link') === 'true';
      var ret = link ? '/signin/enroll' : (body.getAttribute('data-return') || '');
      if (ret) form.set('next', ret);
      var intent = body.getAttribute('data-intent') || '';
      if (intent && !link) form.set('intent', intent);
      if (link) form.set('link', 'true');
      b.disabled = true;
      call('POST', '/auth/oauth2rp/' + encodeURIComponent(b.getAttribute('data-provider')), form)
        .then(function (r) {
          if (r.status === 200 && r.data && r.data.URL) { window.location.assign(r.data.URL); return; }
          b.disabled = false;
          if (r.status === 401 && link) {
            window.location.assign('/signin?return=' + encodeURIComponent('/signin/enroll') +
              (r.data && r.data.Intent ? '&intent=' + encodeURIComponent(r.data.Intent) : ''));
            return;
          }
          alertBox((r.data && r.data.Message) || 'The provider cannot be used now.');
        }, function () { b.disabled = false; alertBox('The service did not answer.'); });
    });
  });
  var list = document.getElementById('provider-links');
  function renderLinks() {
    call('GET', '/auth/oauth2rp/links').then(function (r) {
      if (r.status !== 200 || !r.data) return;
      list.textContent = '';
      if (r.data.length === 0) {
        var none = document.createElement('li');
        none.className = 'muted';
        none.textContent = 'None linked yet.';
        list.appendChild(none);
      }
      r.data.forEach(function (l) {
        var li = document.createElement('li');
        var text = document.createElement('span');
        text.textContent = (names[l.AppID] || l.AppID) + (l.Email ? ' · ' + l.Email : '');
        var rm = document.createElement('button');
        rm.type = 'button';
        rm.className = 'danger';
        rm.textContent = 'Remove';
        rm.addEventListener('click', function () {
          call('DELETE', '/auth/oauth2rp/links/' + encodeURIComponent(l.ID)).then(function (d) {
            if (d.status === 204) { renderLinks(); return; }
            if (d.status === 401 && d.data && d.data.Intent) {
              window.location.assign('/signin?return=' + encodeURIComponent('/signin/enroll') +
                '&intent=' + encodeURIComponent(d.data.Intent));
              return;
            }
            alertBox((d.data && d.data.Message) || 'The link could not be removed.');
          });
        });
        li.appendChild(text);
        li.appendChild(rm);
        list.appendChild(li);
      });
    });
  }
  if (list) renderLinks();
})();
`;
