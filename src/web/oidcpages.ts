/** Pages of the OpenID provider: consent, sign-out confirmation, errors. Every dynamic value goes through esc(). */
import { esc } from '../core/html.js';
import type { ProviderPages } from '../oidc/provider.js';
import { assetUrl } from './bundle.js';
import { ICON_LINKS } from './favicon.js';

function frame(tenant: string, title: string, main: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${esc(title)} · ${esc(tenant)}</title>
${ICON_LINKS}
<link rel="stylesheet" href="${assetUrl('style.css')}">
</head>
<body data-page="oidc">
<header class="top"><span class="logo" aria-hidden="true"></span><span class="name">${esc(tenant)}</span></header>
<main>
${main}
</main>
<footer>Gatehouse</footer>
</body>
</html>
`;
}

/** What each scope lets the application see, in words a person can judge. */
const SCOPE_WORDS: Record<string, string> = {
  openid: 'Know who you are (your user ID)',
  email: 'See your e-mail address',
  profile: 'See your name and user name',
  groups: 'See which groups you belong to',
  offline_access: 'Stay signed in when you are not using it',
};

export interface ConsentView {
  tenant: string;
  appName: string;
  appUrl: string;
  userEmail: string;
  scopes: string[];
  /** Form target and its anti-forgery token. */
  action: string;
  token: string;
}

export function consentPage(v: ConsentView): string {
  const items = v.scopes
    .map((s) => `<li>${esc(SCOPE_WORDS[s] ?? `Use the permission “${s}”`)}</li>`)
    .join('\n        ');
  const site = v.appUrl ? `<p class="muted">${esc(v.appUrl)}</p>` : '';
  return frame(
    v.tenant,
    `Allow ${v.appName}?`,
    `<section class="card" id="consent">
      <h1>Allow <span id="app-name">${esc(v.appName)}</span> access?</h1>
      ${site}
      <p class="lead">Signed in as <strong id="user-email">${esc(v.userEmail)}</strong>. The application asks to:</p>
      <ul id="scopes">
        ${items}
      </ul>
      <form method="post" action="${esc(v.action)}">
        <input type="hidden" name="token" value="${esc(v.token)}">
        <div class="row">
          <button type="submit" name="decision" value="deny" class="secondary" id="deny">Deny</button>
          <button type="submit" name="decision" value="allow" id="allow">Allow</button>
        </div>
      </form>
      <p class="muted">You can withdraw this later by signing out of the application.</p>
    </section>`,
  );
}

export function messagePage(tenant: string, title: string, text: string): string {
  return frame(
    tenant,
    title,
    `<section class="card"><h1>${esc(title)}</h1><p class="lead">${esc(text)}</p></section>`,
  );
}

/** prompt=login or max_age: the person confirms, the session ends, and they sign in again. */
export function reauthPage(tenant: string, path: string, token: string): string {
  return frame(
    tenant,
    'Sign in again',
    `<section class="card" id="reauth-card">
      <h1>Sign in again</h1>
      <p class="lead">The application asks you to confirm who you are: you will be signed out and asked to sign in again.</p>
      <form method="post" action="${esc(path)}/reauth">
        <input type="hidden" name="token" value="${esc(token)}">
        <button type="submit" id="reauth" class="block">Sign in again</button>
      </form>
    </section>`,
  );
}

/** The HTML the provider renders itself (logout confirmation, logout done, errors). */
export const providerPages: ProviderPages = {
  logout: (tenant, form, clientName) =>
    frame(
      tenant,
      'Sign out',
      `<section class="card" id="logout">
      <h1>Sign out?</h1>
      <p class="lead">${clientName ? `${esc(clientName)} asks to sign you out.` : 'An application asks to sign you out.'} Signing out ends your ${esc(tenant)} session in this browser.</p>
      ${form}
      <div class="row">
        <button type="submit" form="op.logoutForm" class="secondary" id="stay">Stay signed in</button>
        <button type="submit" form="op.logoutForm" name="logout" value="yes" id="signout" autofocus>Sign out</button>
      </div>
    </section>`,
    ),
  loggedOut: (tenant, clientName) =>
    messagePage(
      tenant,
      'Signed out',
      clientName ? `You are signed out of ${clientName}.` : 'You are signed out.',
    ),
  error: (tenant, error, description) =>
    messagePage(tenant, 'Sign-in could not continue', description ? `${error}: ${description}` : error),
};
