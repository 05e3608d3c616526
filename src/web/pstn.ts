/**
 * The phone factor on the pages (docs/signin.md, "Phone"): the sign-in form (pick a phone, send
 * a code, type it) and the security-settings card (add a number, verify it, remove it). Markup is
 * spliced into pages.ts; the script is src/web/assets/pstn.ts.
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
