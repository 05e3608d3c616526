/** What every script of the sign-in pages does with the page: find, show and hide, say. */

/**
 * The element with this id. The pages' markup (src/web/*.ts) has every id a script asks for on
 * the page it runs on, so a missing one is a bug in the markup and fails where it is used.
 */
export function $<T extends HTMLElement = HTMLElement>(id: string): T {
  return document.getElementById(id) as T;
}

/** The element with this id, or null: for parts a page has only in some configurations. */
export const find = (id: string): HTMLElement | null => document.getElementById(id);

export function show(el: HTMLElement | null, on: boolean): void {
  if (el) el.hidden = !on;
}

/** The page's alert box (role=alert): kind '' | 'ok' | 'error' | 'warn'; no text hides it. */
export function alertBox(kind: string, text: string): void {
  const box = find('alert');
  if (!box) return;
  box.className = `alert ${kind}`;
  box.textContent = text;
  box.hidden = !text;
  if (text) box.focus();
}

/** The top bar and other "signed in / signed out" parts (data-when="in" | "out"), kept current. */
export function setSignedIn(on: boolean): void {
  document.body.setAttribute('data-signed-in', on ? 'yes' : 'no');
  for (const el of document.querySelectorAll<HTMLElement>('[data-when]')) {
    el.hidden = (el.getAttribute('data-when') === 'in') !== on;
  }
}

/** Where to sign in (or step up) for `intent`, coming back to `back` (a path here). */
export const signinFor = (back: string, intent: string) =>
  `/signin?return=${encodeURIComponent(back)}&intent=${encodeURIComponent(intent)}`;
