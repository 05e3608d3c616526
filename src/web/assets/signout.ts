/** The sign-out page (/signin/signout): one button, the answer in the alert box. */
import { api, explain } from './api.js';
import { $, alertBox, setSignedIn } from './dom.js';

export function initSignout(): void {
  $('signout').addEventListener('click', () => {
    api('POST', '/auth/signout').then((r) => {
      if (r.status === 204) {
        setSignedIn(false);
        $('not-signed-in').hidden = true;
        alertBox('ok', 'You are signed out.');
      } else alertBox('error', explain(r));
    });
  });
}
