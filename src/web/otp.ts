/**
 * The e-mail link on the pages (docs/signin.md, "E-mail links"): the sign-in form and its waiting
 * state, the security-settings card, and the page the link opens (/signin/otp). The markup is
 * spliced into pages.ts; the script is src/web/assets/otp.ts.
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
