/**
 * The sign-in pages' part of sign-in through other identity providers (docs/federation.md): one
 * button per provider on the sign-in page, "link" buttons and the links on the security settings
 * page. Their script is src/web/assets/federation.ts, part of the pages' bundle.
 */
import { esc } from '../core/html.js';

export interface ProviderButton {
  ID: string;
  Name: string;
}

/** Below the e-mail form: "or" and a button per provider. Empty when there is none. */
export function providerButtons(list: readonly ProviderButton[]): string {
  if (list.length === 0) return '';
  const buttons = list
    .map(
      (p) =>
        `<button type="button" class="secondary block provider" data-provider="${esc(p.ID)}">Continue with ${esc(p.Name)}</button>`,
    )
    .join('\n    ');
  return `
  <div id="providers" class="providers">
    <p class="or"><span>or</span></p>
    ${buttons}
  </div>`;
}

/** A card for the security settings page: the user's links, and a button to link each provider. */
export function providerLinksCard(list: readonly ProviderButton[]): string {
  if (list.length === 0) return '';
  const buttons = list
    .map(
      (p) =>
        `<button type="button" class="secondary" data-provider="${esc(p.ID)}" data-link="true">Link ${esc(p.Name)}</button>`,
    )
    .join('\n    ');
  return `
  <section class="card" aria-labelledby="h-providers">
    <h2 id="h-providers">Sign-in providers</h2>
    <p class="muted">Accounts at other identity providers that may sign you in here.</p>
    <ul id="provider-links" class="links"></ul>
    <div class="row">
    ${buttons}
    </div>
  </section>`;
}
