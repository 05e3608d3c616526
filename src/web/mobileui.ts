/**
 * Mobile push on the pages (docs/signin.md, "Mobile push"): the sign-in form and its waiting state
 * (the number to type on the device), the settings card, the service's small web app at
 * /signin/mobile (its markup and manifest). Routes: mobile.ts; the script and the service worker:
 * src/web/assets/mobile.ts and mobile-sw.ts.
 */

export const MOBILE_SIGNIN_FORM = `
    <form id="f-mobile" class="factor" hidden>
      <p class="muted">We send a sign-in request to your registered phones and browsers.</p>
      <button type="submit" class="block">Send a request to my phone</button>
    </form>
    <div id="mobile-wait" class="factor" hidden>
      <p class="muted">On your device, open the request and type this number:</p>
      <p class="match" id="mobile-number" aria-live="polite"></p>
      <p class="muted">This page continues by itself once you approve.</p>
      <button type="button" id="mobile-cancel" class="secondary">Use another way</button>
    </div>`;

export const MOBILE_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-mobile">
    <h2 id="h-mobile">Phone app <span id="st-mobile" class="badge"></span></h2>
    <p class="muted">Approve sign-ins from a phone or another browser with notifications.</p>
    <ul id="mobile-list" class="plain"></ul>
    <p><a href="/signin/mobile">Set up a device</a> (open this on the device)</p>
  </section>`;

export const MOBILE_MAIN = `
<section class="card" aria-labelledby="h-mobile-app">
  <h1 id="h-mobile-app">Sign-in approvals</h1>
  <div id="mobile-request" hidden>
    <p class="lead">Someone asked to sign in as <strong id="mreq-email"></strong>.</p>
    <dl class="facts">
      <dt>Browser</dt><dd id="mreq-browser"></dd>
      <dt>Network address</dt><dd id="mreq-address"></dd>
      <dt>Asked at</dt><dd id="mreq-time"></dd>
    </dl>
    <form id="mreq-form">
      <label for="mreq-number">Number shown on the sign-in page</label>
      <input id="mreq-number" inputmode="numeric" pattern="[0-9]*" maxlength="2" autocomplete="off" required>
      <div class="row">
        <button type="submit">Approve</button>
        <button type="button" id="mreq-deny" class="danger">Deny, this was not me</button>
      </div>
    </form>
  </div>
  <p id="mobile-result" hidden></p>
  <div id="mobile-setup">
    <p class="muted">Use this browser to approve sign-ins: it receives a notification for each request.</p>
    <label for="mobile-name">Name of this device</label>
    <input id="mobile-name" maxlength="80" autocomplete="off">
    <button type="button" id="mobile-register">Use this device for sign-in approvals</button>
  </div>
</section>`;

/** The web app's manifest: installable, opening on the approvals page. */
export const MOBILE_MANIFEST = JSON.stringify({
  name: 'Sign-in approvals',
  short_name: 'Approvals',
  start_url: '/signin/mobile',
  scope: '/signin/',
  display: 'standalone',
  background_color: '#f4f5f9',
  theme_color: '#3754d6',
  icons: [{ src: '/favicon.svg', sizes: 'any', type: 'image/svg+xml' }],
});
