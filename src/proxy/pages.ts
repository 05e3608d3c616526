/**
 * The proxy's error pages for browsers (401, 403, 404, 5xx): the sign-in pages' look (their
 * colours, card and type, light and dark), inline because the proxy serves no assets of its own
 * and must not depend on the application's. The service's stylesheet is not reachable from here:
 * the proxy shares only src/wire with the service, so the few rules it needs are repeated.
 */
import { esc } from '../core/html.js';

const STYLE = `
:root { --bg: #f4f5f9; --card: #ffffff; --ink: #1d2330; --muted: #5b6475; --line: #d9dde7;
  --brand: #3754d6; --brand-ink: #ffffff; --shadow: rgba(20, 30, 60, .06); color-scheme: light dark;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
@media (prefers-color-scheme: dark) { :root { --bg: #11151d; --card: #1a202b; --ink: #e7eaf1;
  --muted: #a9b1c1; --line: #343c4c; --brand: #8fa4ff; --brand-ink: #0e1424; --shadow: rgba(0, 0, 0, .35); } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); line-height: 1.5; min-height: 100vh; }
a { color: var(--brand); }
header.top { display: flex; align-items: center; gap: .6rem; padding: 1rem 1.5rem; }
header.top .logo { width: 28px; height: 28px; border-radius: 8px; background: linear-gradient(135deg, #3754d6, #7b5cf0); }
header.top .name { font-weight: 650; }
main { max-width: 440px; margin: 4vh auto 2rem; padding: 0 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 12px;
  box-shadow: 0 1px 2px var(--shadow), 0 8px 24px var(--shadow); padding: 2rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
p.lead { color: var(--muted); margin: 0 0 1.5rem; }
p.code { color: var(--muted); font-size: .85rem; margin: 1.5rem 0 0; }
a.button { display: inline-block; font-weight: 600; border-radius: 8px; padding: .65rem 1.1rem;
  background: var(--brand); color: var(--brand-ink); text-decoration: none; }
a.button:focus-visible { outline: 3px solid rgba(55, 84, 214, .35); outline-offset: 2px; }
footer { text-align: center; color: var(--muted); font-size: .85rem; padding: 1rem; }`;

/** What a status means to the person in front of the browser. */
const TITLES: Record<number, string> = {
  400: 'This request cannot be served',
  401: 'Sign in to continue',
  403: 'You do not have access',
  404: 'Not found',
  405: 'Not allowed',
  408: 'The request took too long',
  413: 'The request is too large',
  502: 'The application cannot be reached',
  503: 'Temporarily unavailable',
  504: 'The application did not answer in time',
};

export interface PageDetail {
  /** The App the proxy guards (from the service's registration answer), when known. */
  appName?: string;
  /** A way forward: the access-request page (403) or the sign-in (401). */
  link?: { href: string; text: string };
}

/** The error page: status, a title, the message, a way forward when there is one, the error code. */
export function errorPage(status: number, code: string, message: string, detail: PageDetail = {}): string {
  const title = TITLES[status] ?? (status >= 500 ? 'Something went wrong' : 'This request cannot be served');
  const app = detail.appName ? `<p class="lead">${esc(detail.appName)}</p>` : '';
  // The message as a sentence, unless it only repeats the title.
  const sentence = message === '' ? '' : message.charAt(0).toUpperCase() + message.slice(1);
  const said =
    sentence === '' || sentence.toLowerCase() === title.toLowerCase() ? '' : `<p>${esc(sentence)}</p>\n`;
  const link = detail.link
    ? `<p><a class="button" href="${esc(detail.link.href)}">${esc(detail.link.text)}</a></p>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${status} ${esc(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header class="top"><span class="logo" aria-hidden="true"></span><span class="name">Gatehouse</span></header>
<main>
<section class="card" aria-labelledby="h-error">
<h1 id="h-error">${esc(title)}</h1>
${app}${said}${link}<p class="code">${status} · ${esc(code)}</p>
</section>
</main>
<footer>Gatehouse</footer>
</body>
</html>
`;
}
