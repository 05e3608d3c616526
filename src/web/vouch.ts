import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { magicWords } from '../auth/factors/vouch/words.js';
import { tenantDoc } from '../auth/integrity.js';
import { esc } from '../core/html.js';
import type { ServiceContext } from '../store/service.js';
import { assetUrl } from './bundle.js';
import { ICON_LINKS } from './favicon.js';
import { safeReturnUrl } from './returnurl.js';

/**
 * The vouching pages (docs/signin.md, "Vouching"):
 * - GET /signin/vouch?return=&intent=  the requester: ask, see the magic words and who may vouch,
 *   record a video with the camera (MediaRecorder), send it, wait for the decision;
 * - GET /signin/vouch/reference       one's own reference video: see it, record a new one (step-up);
 * - GET /signin/vouch/:id              a voucher: the request, the reference video, the new video
 *   and the magic words; approve or decline.
 * Both are static HTML plus the vouch script (src/web/assets/vouch.ts); everything they show comes from the API, which
 * decides who may see what. Videos play from the service's own origin (media-src 'self').
 */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; " +
  "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const OPTIONAL = { config: { auth: 'optional' as const } };

function layout(tenant: string, title: string, page: string, data: Record<string, string>, main: string) {
  const attrs = Object.entries(data)
    .map(([k, v]) => ` data-${k}="${esc(v)}"`)
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${esc(title)} · ${esc(tenant)}</title>
${ICON_LINKS}
<link rel="stylesheet" href="${assetUrl('style.css')}">
<link rel="stylesheet" href="${assetUrl('vouch.css')}">
<script src="${assetUrl('vouch.js')}" defer></script>
</head>
<body data-page="${page}"${attrs}>
<header class="top">
  <span class="logo" aria-hidden="true"></span><span class="name">${esc(tenant)}</span>
  <nav aria-label="Account"><a href="/signin">Sign in</a><a href="/signin/enroll">Security settings</a><a href="/signin/vouch/reference">Reference video</a></nav>
</header>
<main class="wide">
<div id="alert" class="alert" role="alert" tabindex="-1" hidden></div>
${main}
</main>
<footer>Gatehouse</footer>
</body>
</html>
`;
}

export function requesterPage(tenant: string, returnUrl: string, intent: string): string {
  return layout(
    tenant,
    'Ask a colleague to vouch for you',
    'vouch-request',
    { return: returnUrl, intent },
    `
<section class="card" aria-labelledby="h-ask">
  <h1 id="h-ask">Ask a colleague to vouch for you</h1>
  <p class="lead">Lost your phone or security key? A colleague who knows you can confirm it is you.
  You record a short video saying a few words; they compare it with the video you recorded earlier.</p>
  <form id="v-ask">
    <label for="v-reason">Note for your colleague <span class="muted">(optional)</span></label>
    <input id="v-reason" maxlength="1024" placeholder="I lost my phone on the train">
    <button type="submit" class="block">Ask for a vouch</button>
  </form>
  <p class="muted">Vouching needs a reference video: <a href="/signin/vouch/reference">record yours</a> while you can still sign in.</p>
</section>
<section class="card" id="v-record" aria-labelledby="h-rec" hidden>
  <h2 id="h-rec">Record your video</h2>
  <p>Look at the camera and say these words:</p>
  <p class="words" id="v-words" aria-live="polite"></p>
  <video id="v-preview" class="video" muted playsinline aria-label="Camera preview"></video>
  <div class="row">
    <button type="button" id="v-start">Start recording</button>
    <button type="button" id="v-stop" class="secondary" disabled>Stop and send</button>
  </div>
  <p class="muted" id="v-status" aria-live="polite"></p>
</section>
<section class="card" id="v-wait" aria-labelledby="h-wait" hidden>
  <h2 id="h-wait">Waiting for a colleague</h2>
  <p>Any one of them can vouch for you: <span id="v-vouchers"></span>.</p>
  <p>Send them this link: <a id="v-link" href="#"></a></p>
  <p class="muted">State: <span id="v-state" class="badge">pending</span> · expires <span id="v-expires"></span></p>
  <button type="button" id="v-cancel" class="danger">Cancel the request</button>
</section>
<section class="card" id="v-done" aria-labelledby="h-done" hidden>
  <h2 id="h-done"></h2>
  <p id="v-done-text"></p>
  <p><a id="v-continue" href="/signin">Continue</a></p>
</section>`,
  );
}

export function referencePage(tenant: string, words: string[]): string {
  return layout(
    tenant,
    'Your reference video',
    'vouch-reference',
    { words: words.join(',') },
    `
<section class="card" aria-labelledby="h-refv">
  <h1 id="h-refv">Your reference video</h1>
  <p class="lead">If you ever lose your sign-in factors, colleagues who vouch for you compare a new
  recording with this one. Changing it needs your full sign-in, like any credential.</p>
  <p id="f-have" aria-live="polite">Checking…</p>
  <video id="f-current" class="video" controls playsinline preload="metadata" hidden></video>
</section>
<section class="card" aria-labelledby="h-frec">
  <h2 id="h-frec">Record a new one</h2>
  <p>Look at the camera and say these words:</p>
  <p class="words" id="f-words">${esc(words.join(' · '))}</p>
  <video id="f-preview" class="video" muted playsinline aria-label="Camera preview"></video>
  <div class="row">
    <button type="button" id="f-start">Start recording</button>
    <button type="button" id="f-stop" class="secondary" disabled>Stop and save</button>
  </div>
  <p class="muted" id="f-status" aria-live="polite"></p>
</section>`,
  );
}

export function voucherPage(tenant: string, id: string): string {
  return layout(
    tenant,
    'Vouch for a colleague',
    'vouch-decide',
    { id },
    `
<section class="card" aria-labelledby="h-decide">
  <h1 id="h-decide">Vouch for a colleague</h1>
  <p class="lead" id="d-lead">Loading the request…</p>
  <dl class="facts" id="d-facts" hidden>
    <dt>Who</dt><dd id="d-who"></dd>
    <dt>Their note</dt><dd id="d-reason"></dd>
    <dt>Words they must say</dt><dd class="words" id="d-words"></dd>
    <dt>Approving gives them</dt><dd id="d-level"></dd>
    <dt>State</dt><dd><span id="d-state" class="badge"></span></dd>
  </dl>
</section>
<div class="grid" id="d-videos" hidden>
  <section class="card" aria-labelledby="h-ref">
    <h2 id="h-ref">Reference video <span class="muted">(recorded earlier)</span></h2>
    <video id="d-ref" class="video" controls playsinline preload="auto"></video>
  </section>
  <section class="card" aria-labelledby="h-new">
    <h2 id="h-new">New video <span class="muted">(just now)</span></h2>
    <video id="d-new" class="video" controls playsinline preload="auto"></video>
    <p class="muted" id="d-novideo" hidden>No video yet: ask them to record it, then reload this page.</p>
  </section>
</div>
<section class="card" id="d-actions" aria-labelledby="h-act" hidden>
  <h2 id="h-act">Is this your colleague, saying the words above?</h2>
  <p class="muted">Only approve if you recognise the person in both videos and they say exactly these words.
  If anything seems off, decline: they can ask an administrator instead.</p>
  <div class="row">
    <button type="button" id="d-approve">Yes, approve</button>
    <button type="button" id="d-decline" class="danger">No, decline</button>
  </div>
</section>`,
  );
}

function send(reply: FastifyReply, html: string) {
  reply.header('Content-Security-Policy', CSP);
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('X-Frame-Options', 'DENY');
  reply.header('Referrer-Policy', 'no-referrer');
  reply.header('Cache-Control', 'no-store');
  return reply.code(200).type('text/html; charset=utf-8').send(html);
}

const query = (req: FastifyRequest, name: string) => {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
};

export function registerVouchPages(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/signin/vouch', OPTIONAL, async (req, reply) => {
    const tenant = await tenantDoc(ctx);
    const ret = safeReturnUrl(req, tenant, query(req, 'return'));
    return send(
      reply,
      requesterPage(String(tenant.Name || 'Gatehouse'), ret, query(req, 'intent').slice(0, 4096)),
    );
  });
  app.get('/signin/vouch/reference', OPTIONAL, async (_req, reply) =>
    send(reply, referencePage(String((await tenantDoc(ctx)).Name || 'Gatehouse'), magicWords(4))),
  );
  app.get('/signin/vouch/:id', OPTIONAL, async (req, reply) => {
    const id = String((req.params as { id: string }).id).slice(0, 64);
    return send(reply, voucherPage(String((await tenantDoc(ctx)).Name || 'Gatehouse'), id));
  });
}
