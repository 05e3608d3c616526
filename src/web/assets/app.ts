/**
 * The sign-in pages' script (served as /signin/assets/app-<hash>.js; src/web/pages.ts, layout()):
 * one bundle for every page of that frame, which runs the part of the page it is on (data-page).
 * Security keys bind first, the page's own part next, the identity providers' buttons last.
 */
import { initDebug } from './debug.js';
import { initEnroll } from './enroll.js';
import { initFederation } from './federation.js';
import { initMobileApp, initMobileEnroll, initMobileSignin } from './mobile.js';
import { initOtpEnroll, initOtpLink, initOtpSignin } from './otp.js';
import { readPage } from './page.js';
import { initPstnEnroll, initPstnSignin, pstnLoad } from './pstn.js';
import { initSignin } from './signin.js';
import { initSignout } from './signout.js';
import { initKeyEnroll, initKeySignin } from './webauthn.js';

function main(): void {
  const page = readPage();
  let emailStep = () => {};
  if (page.page === 'signin') emailStep = initKeySignin();
  else if (page.page === 'enroll') initKeyEnroll();

  // Times the server wrote in UTC (<time data-local>), in the reader's own time zone.
  for (const t of document.querySelectorAll('time[data-local]')) {
    const d = new Date(t.getAttribute('datetime') || '');
    if (!Number.isNaN(d.getTime()))
      t.textContent = d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
  }
  if (page.page === 'signin')
    initSignin(page, { emailStep: () => emailStep(), pstnLoad }, [
      initOtpSignin,
      initPstnSignin,
      initMobileSignin,
    ]);
  else if (page.page === 'enroll') initEnroll([initOtpEnroll, initPstnEnroll, initMobileEnroll]);
  else if (page.page === 'signout') initSignout();
  else if (page.page === 'debug') initDebug();
  else if (page.page === 'otp') initOtpLink();
  else if (page.page === 'mobile') initMobileApp();
  initFederation();
}

main();
