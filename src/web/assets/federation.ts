/**
 * Sign-in through other identity providers on the pages (docs/federation.md): a provider button
 * asks the service to start the flow (POST /auth/oauth2rp/:appID, with the page's return URL and
 * intent) and sends the browser to the authorization URL it answers; on the settings page it lists
 * the links (GET /auth/oauth2rp/links) with a remove button. Markup: src/web/federation.ts.
 */
import { api, errorOf } from './api.js';
import { signinFor } from './dom.js';

function alertError(text: string): void {
  const a = document.getElementById('alert');
  if (!a) return;
  a.className = 'alert error';
  a.textContent = text;
  a.hidden = false;
  a.focus();
}

function bindProvider(b: HTMLButtonElement): void {
  const body = document.body;
  b.addEventListener('click', () => {
    const form: Record<string, string> = {};
    const link = b.getAttribute('data-link') === 'true';
    const ret = link ? '/signin/enroll' : body.getAttribute('data-return') || '';
    if (ret) form.next = ret;
    const intent = body.getAttribute('data-intent') || '';
    if (intent && !link) form.intent = intent;
    if (link) form.link = 'true';
    b.disabled = true;
    api<{ URL?: string; Intent?: string }>(
      'POST',
      `/auth/oauth2rp/${encodeURIComponent(b.getAttribute('data-provider') ?? '')}`,
      {
        form,
      },
    ).then(
      (r) => {
        if (r.status === 200 && r.data && r.data.URL) {
          window.location.assign(r.data.URL);
          return;
        }
        b.disabled = false;
        if (r.status === 401 && link) {
          window.location.assign(
            `/signin?return=${encodeURIComponent('/signin/enroll')}${
              r.data?.Intent ? `&intent=${encodeURIComponent(r.data.Intent)}` : ''
            }`,
          );
          return;
        }
        alertError(errorOf(r)?.Message || 'The provider cannot be used now.');
      },
      () => {
        b.disabled = false;
        alertError('The service did not answer.');
      },
    );
  });
}

interface ProviderLink {
  ID: string;
  AppID: string;
  Email?: string;
}

function renderLinks(list: HTMLElement, names: Record<string, string>): void {
  api<ProviderLink[]>('GET', '/auth/oauth2rp/links').then((r) => {
    if (r.status !== 200 || !r.data) return;
    list.textContent = '';
    if (r.data.length === 0) {
      const none = document.createElement('li');
      none.className = 'muted';
      none.textContent = 'None linked yet.';
      list.appendChild(none);
    }
    for (const l of r.data) {
      const li = document.createElement('li');
      const text = document.createElement('span');
      text.textContent = (names[l.AppID] || l.AppID) + (l.Email ? ` · ${l.Email}` : '');
      const rm = document.createElement('button');
      rm.type = 'button';
      rm.className = 'danger';
      rm.textContent = 'Remove';
      rm.addEventListener('click', () => {
        api('DELETE', `/auth/oauth2rp/links/${encodeURIComponent(l.ID)}`).then((d) => {
          if (d.status === 204) {
            renderLinks(list, names);
            return;
          }
          const e = errorOf(d);
          if (d.status === 401 && e && e.Intent) {
            window.location.assign(signinFor('/signin/enroll', e.Intent));
            return;
          }
          alertError(e?.Message || 'The link could not be removed.');
        });
      });
      li.appendChild(text);
      li.appendChild(rm);
      list.appendChild(li);
    }
  });
}

/** Binds the provider buttons and the list of links, where the page has them. */
export function initFederation(): void {
  const names: Record<string, string> = {};
  for (const b of document.querySelectorAll<HTMLButtonElement>('button[data-provider]')) {
    names[b.getAttribute('data-provider') ?? ''] = (b.textContent ?? '').replace(
      /^(Continue with|Link) /,
      '',
    );
    bindProvider(b);
  }
  const list = document.getElementById('provider-links');
  if (list) renderLinks(list, names);
}
