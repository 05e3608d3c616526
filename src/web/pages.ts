/** Server-rendered HTML of the sign-in pages. Every dynamic value goes through esc(). */

import type { Factor } from '../auth/factors/factor.js';
import { esc } from '../core/html.js';
import { assetUrl } from './bundle.js';
import { pageFactors, settingsCards, signinForms } from './factorforms.js';
import { ICON_LINKS } from './favicon.js';
import { type ProviderButton, providerButtons, providerLinksCard } from './federation.js';
import { MOBILE_MAIN } from './mobileui.js';
import { OTP_LINK_MAIN } from './otp.js';

export interface PageOpts {
  page:
    | 'signin'
    | 'enroll'
    | 'signout'
    | 'debug'
    | 'otp'
    | 'mobile'
    | 'setup'
    | 'error'
    | 'groups'
    | 'approvals';
  /** Extra head elements (the approvals app's manifest). */
  head?: string;
  title: string;
  tenant: string;
  returnUrl?: string;
  intent?: string;
  wide?: boolean;
  main: string;
  /** Whether the browser holds a signed-in session: decides the top bar's links (the script keeps it current). */
  signedIn?: boolean;
  /** False when security keys cannot work with this configuration: the pages do not offer them. */
  passkeys?: boolean;
  /**
   * 'same-origin' for pages whose plain forms post back here: under 'no-referrer' browsers send
   * `Origin: null` with a form's post, and the CSRF check (same Origin) would refuse it.
   */
  referrer?: 'no-referrer' | 'same-origin';
}

/** Shown only while signed out (`out`) or in (`in`); the page script flips them when the state changes. */
const when = (state: 'in' | 'out', signedIn: boolean) =>
  `data-when="${state}"${(state === 'in') !== signedIn ? ' hidden' : ''}`;

/** Marks the top bar's link to the page being shown (read out as "current page"). */
const here = (o: PageOpts, page: PageOpts['page']) => (o.page === page ? ' aria-current="page"' : '');

/** The frame of every page the service draws: head, the top bar with the account links, main, footer. */
export function layout(o: PageOpts): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="${o.referrer ?? 'no-referrer'}">
<title>${esc(o.title)} · ${esc(o.tenant)}</title>
${ICON_LINKS}${o.head ?? ''}
<link rel="stylesheet" href="${assetUrl('style.css')}">
<script src="${assetUrl('app.js')}" defer></script>
</head>
<body data-page="${o.page}"${o.passkeys === false ? ' data-passkeys="no"' : ''} data-signed-in="${o.signedIn ? 'yes' : 'no'}" data-return="${esc(o.returnUrl ?? '')}" data-intent="${esc(o.intent ?? '')}">
<header class="top">
  <span class="logo" aria-hidden="true"></span><span class="name">${esc(o.tenant)}</span>
  <nav aria-label="Account">
    <a href="/signin" ${when('out', !!o.signedIn)}${here(o, 'signin')}>Sign in</a><a href="/signin/enroll" ${when('in', !!o.signedIn)}${here(o, 'enroll')}>Security settings</a><a href="/signin/approvals" ${when('in', !!o.signedIn)}${here(o, 'approvals')}>Access requests</a><a href="/signin/debug"${here(o, 'debug')}>API explorer</a><a href="/signin/signout" ${when('in', !!o.signedIn)}${here(o, 'signout')}>Sign out</a>
  </nav>
</header>
<main${o.wide ? ' class="wide"' : ''}>
<div id="alert" class="alert" role="alert" tabindex="-1" hidden></div>
${o.main}
</main>
<footer>Gatehouse</footer>
</body>
</html>
`;
}

export function signinPage(
  tenant: string,
  returnUrl: string,
  intent: string,
  returnRefused: boolean,
  /** Where the person goes afterwards, in words (an App's name, a host, the tenant): src/web/destination.ts. */
  destination = tenant,
  signedIn = false,
  providers: readonly ProviderButton[] = [],
  passkeys = true,
  /** The sign-in factors, whose forms the page draws (src/web/factorforms.ts). */
  factors: readonly Factor[],
): string {
  return layout({
    page: 'signin',
    title: 'Sign in',
    tenant,
    returnUrl,
    intent,
    signedIn,
    passkeys,
    main: `
<section class="card" aria-labelledby="h-signin">
  <h1 id="h-signin">Sign in</h1>
  <p class="lead" id="lead">to continue to <span id="destination">${esc(destination)}</span></p>
  ${returnRefused ? '<p class="alert error">The page that sent you here is not on the list of allowed return addresses, so you will stay on this site after signing in.</p>' : ''}
  <div id="step-email" hidden>
    <form id="f-email">
      <label for="email">E-mail address</label>
      <input id="email" name="email" type="email" autocomplete="username webauthn" required>
      <button type="submit" class="block">Continue</button>
    </form>
    ${passkeys ? '<button type="button" id="passkey-signin" class="secondary block" hidden>Sign in with a passkey</button>' : ''}${providerButtons(providers)}
  </div>
  <div id="step-factors" data-factors="${esc(JSON.stringify(pageFactors(factors)))}" hidden>
    <div class="who"><span><span id="who-label">Signing in as</span> <strong id="who-email"></strong></span>
      <button type="button" id="not-me" class="secondary">Not you?</button></div>
    <p class="muted" id="progress" aria-live="polite"></p>
    ${signinForms(factors, passkeys)}
    <div id="other-ways" class="row"></div>
    <p id="no-factor" class="alert error" hidden>No sign-in method is set up for this account. Ask an administrator to set a password.</p>
    <p class="muted"><a href="${esc(`/signin/vouch?${new URLSearchParams({ return: returnUrl, intent }).toString()}`)}">Lost your phone or key? Ask a colleague to vouch for you</a></p>
  </div>
  <div id="step-done" hidden>
    <p class="alert ok">Signed in as <strong id="done-who"></strong>.</p>
    <p class="muted" id="done-how"></p>
    <p><a href="/signin/enroll">Security settings</a> · <a href="/signin/debug">API explorer</a> · <a href="/signin/signout">Sign out</a></p>
  </div>
</section>`,
  });
}

const REFERENCE_VIDEO_CARD = `
  <section class="card" aria-labelledby="h-refvideo">
    <h2 id="h-refvideo">Reference video</h2>
    <p class="muted">A short video of you. If you ever lose your sign-in methods, a colleague who vouches for you compares a new recording with it.</p>
    <p><a href="/signin/vouch/reference">View or record your reference video</a></p>
  </section>`;

export function enrollPage(
  tenant: string,
  signedIn = false,
  providers: readonly ProviderButton[] = [],
  passkeys = true,
  factors: readonly Factor[],
): string {
  return layout({
    page: 'enroll',
    title: 'Security settings',
    tenant,
    signedIn,
    passkeys,
    wide: true,
    main: `
<h1>Security settings</h1>
<p class="lead">Signed in as <strong id="enroll-who">…</strong></p>
<p id="enroll-stepup" class="alert warn" hidden>To change anything here, first confirm it’s you with another of your sign-in methods. <a href="/signin?return=%2Fsignin%2Fenroll">Confirm it’s you</a></p>
<div class="grid">
${settingsCards(factors, passkeys, [
  { rank: 55, html: REFERENCE_VIDEO_CARD },
  { rank: 60, html: providerLinksCard(providers) },
])}
</div>`,
  });
}

export function signoutPage(tenant: string, signedIn = false): string {
  return layout({
    page: 'signout',
    title: 'Sign out',
    tenant,
    signedIn,
    main: `
<section class="card" aria-labelledby="h-out">
  <h1 id="h-out">Sign out</h1>
  <div id="signout-form" ${when('in', signedIn)}>
    <p class="lead">End your session in this browser.</p>
    <button type="button" id="signout" class="block">Sign out</button>
  </div>
  <p id="signed-out" ${when('out', signedIn)}><span id="not-signed-in">You are not signed in. </span><a href="/signin">Sign in</a></p>
</section>`,
  });
}

export function debugPage(tenant: string, signedIn = false): string {
  return layout({
    page: 'debug',
    title: 'API explorer',
    tenant,
    signedIn,
    wide: true,
    main: `
<h1>API explorer</h1>
<p class="lead">Requests are sent from this browser with your session (no API key needed).<span ${when('out', signedIn)}> <a href="/signin?return=/signin/debug">Sign in</a> first.</span></p>
<section class="card" aria-labelledby="h-req">
  <h2 id="h-req">Request</h2>
  <form id="d-form">
    <div class="row">
      <div class="narrow"><label for="d-method">Method</label>
        <select id="d-method"><option>GET</option><option>POST</option><option>PUT</option><option>DELETE</option><option>HEAD</option></select></div>
      <div><label for="d-path">Path</label><input id="d-path" value="/users/me" spellcheck="false" required></div>
    </div>
    <label for="d-headers">Headers <span class="muted">(one "Name: value" per line)</span></label>
    <textarea id="d-headers" rows="3" spellcheck="false" placeholder="If-Match: &quot;…&quot;"></textarea>
    <label for="d-body">Body</label>
    <textarea id="d-body" rows="6" spellcheck="false" placeholder="{ }"></textarea>
    <button type="submit">Send</button>
  </form>
</section>
<section class="card" id="d-result" aria-labelledby="h-res" aria-live="polite" hidden>
  <h2 id="h-res">Response <span id="r-status" class="status"></span></h2>
  <p id="d-stepup" class="alert warn" hidden><span id="d-stepup-why"></span> <a id="d-stepup-link" href="/signin"></a></p>
  <h3 class="muted">Headers</h3>
  <pre class="out" id="r-headers"></pre>
  <h3 class="muted">Body</h3>
  <pre class="out" id="r-body"></pre>
</section>`,
  });
}

/** The page a sign-in link opens (/signin/otp#<token>): who asked, approve or refuse. */
export function otpLinkPage(tenant: string): string {
  return layout({ page: 'otp', title: 'Approve a sign-in', tenant, main: OTP_LINK_MAIN });
}

/** The approvals web app (/signin/mobile): registers this browser, answers pushed requests. */
export function mobilePage(tenant: string): string {
  return layout({
    page: 'mobile',
    title: 'Sign-in approvals',
    tenant,
    head: '<link rel="manifest" href="/signin/mobile.webmanifest"><meta name="theme-color" content="#3754d6">',
    main: MOBILE_MAIN,
  });
}
