/** What the server wrote on the page's body for its script (src/web/pages.ts, layout()). */
export interface PageState {
  /** data-page: which page this is. */
  readonly page: string;
  /** Where the browser goes after signing in ('' for no return). */
  readonly returnUrl: string;
  /** The intent the sign-in raises the session for; emptied when the service refuses it. */
  intent: string;
  /** Whether the server found the person signed in when it drew the page (before any step here). */
  readonly signedInAtLoad: boolean;
}

export function readPage(): PageState {
  const body = document.body;
  return {
    page: body.getAttribute('data-page') ?? '',
    returnUrl: body.getAttribute('data-return') || '',
    intent: body.getAttribute('data-intent') || '',
    signedInAtLoad: body.getAttribute('data-signed-in') === 'yes',
  };
}
