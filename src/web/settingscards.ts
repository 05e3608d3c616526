/**
 * The markup of the browser parts of the security settings page (and the security key's sign-in
 * form): cards drawn for factors whose set-up is not a typed secret. src/web/factorforms.ts places
 * them; their scripts are src/web/assets/enroll.ts and webauthn.ts.
 */

/** Security keys and passkeys on the sign-in page (the script: src/web/assets/webauthn.ts). */
export const U2F_SIGNIN_FORM = `
    <form id="f-u2f" class="factor" hidden>
      <p>Use your security key or passkey: insert or touch the key, or confirm on this device.</p>
      <button type="submit" class="block">Use security key</button>
    </form>`;

/** Security keys and passkeys on the settings page: offered only where they can work. */
export const U2F_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-u2f">
    <h2 id="h-u2f">Security keys and passkeys <span id="st-u2f" class="badge"></span></h2>
    <p class="muted">A hardware key (USB, NFC) or a passkey on this device: signs you in without a password, and cannot be phished.</p>
    <ul id="keys" class="keys"></ul>
    <form id="e-u2f">
      <label for="key-name">Name of the new key</label>
      <input id="key-name" maxlength="64" autocomplete="off" placeholder="e.g. Blue key">
      <button type="submit">Add a security key or passkey</button>
    </form>
  </section>`;

/** The authenticator app: a QR code to scan, then a code to confirm it. */
export const TOTP_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-totp">
    <h2 id="h-totp">Authenticator app <span id="st-totp" class="badge"></span></h2>
    <p class="muted">Six-digit codes from an app on your phone, such as Google Authenticator, Microsoft Authenticator or 1Password.</p>
    <p class="muted" id="totp-replace-note" hidden>Replacing it: the app you use now keeps working until you confirm a code from the new one.</p>
    <button type="button" id="totp-start">Set up an authenticator app</button>
    <button type="button" id="totp-remove" class="danger" hidden>Remove</button>
    <div id="totp-setup" hidden>
      <img id="totp-qr" class="qr" alt="QR code to scan with your authenticator app">
      <p class="muted">Or type this key: <code id="totp-secret"></code></p>
      <form id="e-totp">
        <label for="totp-code">Code shown by the app</label>
        <input id="totp-code" inputmode="numeric" autocomplete="one-time-code" maxlength="7" required>
        <button type="submit">Confirm</button>
        <button type="button" id="totp-cancel" class="secondary">Cancel</button>
      </form>
    </div>
  </section>
`;

/** Backup codes: generated, shown once. */
export const BACKUP_ENROLL_CARD = `
  <section class="card" aria-labelledby="h-backup">
    <h2 id="h-backup">Backup codes</h2>
    <p class="muted">Ten single-use codes for when your other methods are not at hand. Generating new ones voids the old ones.</p>
    <button type="button" id="backup-gen">Generate backup codes</button>
    <div id="backup-out" hidden>
      <p class="muted">Store these somewhere safe; they are shown only now.</p>
      <ol id="backup-codes" class="codes"></ol>
    </div>
  </section>
`;
