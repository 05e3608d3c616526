import type { FastifyReply, FastifyRequest } from 'fastify';
import { esc } from '../core/html.js';
import { layout } from './pages.js';

/** Pages allow only their own script and style; images may be data: URLs (the TOTP QR code). */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/**
 * PAGE_CSP without form-action, for the access-request pages: their form's answer may redirect to
 * the `next` URL on another origin (an allowed one: src/groups/check.ts), and Chromium applies
 * form-action to the redirects after a form post too.
 */
const FORM_REDIRECT_CSP = PAGE_CSP.replace(" form-action 'self';", '');

/** A page of the service, with the headers every page carries. */
export function sendHtml(
  reply: FastifyReply,
  status: number,
  html: string,
  referrer: 'no-referrer' | 'same-origin' = 'no-referrer',
  opts: { formRedirects?: boolean } = {},
) {
  reply.header('Content-Security-Policy', opts.formRedirects ? FORM_REDIRECT_CSP : PAGE_CSP);
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('X-Frame-Options', 'DENY');
  reply.header('Referrer-Policy', referrer);
  reply.header('Cache-Control', 'no-store');
  return reply.code(status).type('text/html; charset=utf-8').send(html);
}

/**
 * Whether the client is a browser navigating (it asks for HTML before anything else): it gets
 * an error as a page. Scripts, API clients and the pages' own fetch calls (Accept:
 * application/json) keep the JSON error body; the status and X-Error-Code are the same.
 */
export const wantsHtml = (req: FastifyRequest) => /^\s*text\/html\b/i.test(req.headers.accept ?? '');

/** Headline and advice per status, in the person's words rather than the API's. */
function wording(status: number): { title: string; advice: string } {
  if (status === 404) return { title: 'Page not found', advice: 'There is no page at this address.' };
  if (status === 401) return { title: 'Please sign in', advice: 'This page is for signed-in people.' };
  if (status === 403) return { title: 'Not allowed', advice: 'Your account may not do this.' };
  if (status === 410) return { title: 'Link no longer valid', advice: '' };
  if (status === 429) return { title: 'Too many attempts', advice: 'Please wait a moment and try again.' };
  if (status >= 500)
    return {
      title: 'Something went wrong',
      advice: 'The service could not answer just now. Please try again in a moment.',
    };
  return { title: 'That did not work', advice: '' };
}

export interface ErrorPageOpts {
  tenant: string;
  status: number;
  /** The X-Error-Code. */
  code: string;
  message: string;
  requestId: string;
  signedIn: boolean;
  /** The path asked for, redacted (a 404 names it instead of the API's message). */
  path?: string;
}

/**
 * An error as a page in the sign-in pages' design. Every dynamic value is escaped; the message
 * is the API's (it never holds a secret: errors are written for API clients too).
 */
export function errorPage(o: ErrorPageOpts): string {
  const { title, advice } = wording(o.status);
  const next =
    o.status === 401 && !o.signedIn
      ? '<a href="/signin">Sign in</a>'
      : o.signedIn
        ? '<a href="/signin/enroll">Your security settings</a>'
        : '<a href="/signin">Go to the sign-in page</a>';
  return layout({
    page: 'error',
    title,
    tenant: o.tenant,
    signedIn: o.signedIn,
    main: `
<section class="card" aria-labelledby="h-error">
  <h1 id="h-error">${esc(title)}</h1>
  ${advice ? `<p class="lead">${esc(advice)}</p>` : ''}
  <p class="alert error" id="error-message">${o.status === 404 && o.path ? `Nothing is at <code>${esc(o.path)}</code>.` : esc(o.message)}</p>
  <p>${next}</p>
  <p class="muted">Error ${o.status} · ${esc(o.code)} · request <code id="error-request">${esc(o.requestId)}</code></p>
</section>`,
  });
}
