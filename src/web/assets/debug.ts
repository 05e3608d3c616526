/**
 * The API explorer (/signin/debug): any request, sent from this browser with the session.
 * A request refused with 401 and an intent offers a sign-in (or step-up) that comes back to the
 * same request: it is kept for the trip in this tab's sessionStorage (which no other site can
 * write) for at most RESUME_MS, read once on return (?resume=1), and sent again.
 */
import { api, type ErrorBody } from './api.js';
import { $, alertBox, setSignedIn, show } from './dom.js';

const RESUME_KEY = 'gatehouse.debug.resume';
const RESUME_MS = 10 * 60 * 1000;

/** The form as sent: what a sign-in trip keeps, to send again. */
interface SentRequest {
  method: string;
  path: string;
  headers: string;
  body: string;
}

const field = (id: string) => $<HTMLInputElement>(id);

// Signed in means what the server means when it draws the page: the tenant's read level, no intent.
function refreshSignedIn() {
  return api<{ Authorized?: boolean }>('POST', '/auth').then((r) => {
    setSignedIn(!!r.data?.Authorized);
  });
}

function offerStepUp(data: ErrorBody | null, request: SentRequest | null): void {
  const box = $('d-stepup');
  if (!data || typeof data.Intent !== 'string' || !data.Intent) {
    show(box, false);
    return;
  }
  const stepUp = data.Code === 'Insufficient Integrity';
  $('d-stepup-why').textContent = stepUp
    ? 'This request needs you to confirm who you are again, more strongly than when you signed in.'
    : 'This request needs you to be signed in.';
  const link = $<HTMLAnchorElement>('d-stepup-link');
  link.textContent = stepUp ? 'Confirm it\u2019s you and send it again' : 'Sign in and send it again';
  link.href = `/signin?return=${encodeURIComponent('/signin/debug?resume=1')}&intent=${encodeURIComponent(data.Intent)}`;
  link.onclick = () => {
    try {
      sessionStorage.setItem(RESUME_KEY, JSON.stringify({ at: Date.now(), request }));
    } catch {
      /* storage off: the link still signs in */
    }
  };
  show(box, true);
}

function resumeDebug(): void {
  if (!/(^|[?&])resume=1(&|$)/.test(window.location.search.slice(1))) return;
  history.replaceState(null, '', window.location.pathname);
  let saved: { at?: unknown; request?: SentRequest } | null = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(RESUME_KEY) || 'null');
    sessionStorage.removeItem(RESUME_KEY);
  } catch {
    saved = null;
  }
  if (!saved?.request || typeof saved.at !== 'number') return;
  if (Date.now() - saved.at > RESUME_MS || Date.now() < saved.at) return;
  const q = saved.request;
  field('d-method').value = q.method;
  field('d-path').value = q.path;
  field('d-headers').value = q.headers;
  field('d-body').value = q.body;
  $<HTMLFormElement>('d-form').requestSubmit();
}

/** The body as sent, indented when it is JSON (or JSON lines). */
function pretty(text: string, type: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    if (!/json-lines/.test(type)) return text;
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.stringify(JSON.parse(l), null, 2);
        } catch {
          return l;
        }
      })
      .join('\n');
  }
}

function showResponse(res: Response, text: string, started: number, sent: SentRequest | null): void {
  const ms = Math.round(performance.now() - started);
  const st = $('r-status');
  st.textContent = `${res.status} ${res.statusText}  (${ms} ms)`;
  st.className = `status s${String(res.status).charAt(0)}`;
  const lines: string[] = [];
  res.headers.forEach((v, k) => {
    lines.push(`${k}: ${v}`);
  });
  $('r-headers').textContent = lines.join('\n');
  $('r-body').textContent = pretty(text, res.headers.get('content-type') || '') || '(empty body)';
  show($('d-result'), true);
  let data: ErrorBody | null = null;
  try {
    data = JSON.parse(text);
  } catch {
    data = null;
  }
  offerStepUp(res.status === 401 ? data : null, sent);
  // A 401 may mean the session ended meanwhile: the top bar asks the server rather than guess.
  if (res.status === 401) refreshSignedIn();
}

/** The request the form describes, or a message saying what is wrong with it. */
function requestOf(): { path: string; init: RequestInit } | string {
  const method = field('d-method').value;
  const path = field('d-path').value.trim();
  if (path.charAt(0) !== '/' || path.charAt(1) === '/') return 'The path must start with a single /.';
  const headers: Record<string, string> = { 'X-Requested-With': 'gatehouse-debug' };
  let bad: string | null = null;
  for (const line of field('d-headers').value.split('\n')) {
    if (!line.trim()) continue;
    const i = line.indexOf(':');
    if (i < 1) {
      bad = line;
      continue;
    }
    headers[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  if (bad) return `Header lines are "Name: value": ${bad}`;
  const bodyText = field('d-body').value;
  const init: RequestInit = { method, headers, credentials: 'same-origin' };
  if (bodyText && method !== 'GET' && method !== 'HEAD') {
    init.body = bodyText;
    const hasType = Object.keys(headers).some((k) => k.toLowerCase() === 'content-type');
    if (!hasType) headers['Content-Type'] = 'application/json';
  }
  return { path, init };
}

export function initDebug(): void {
  // The last request sent: a sign-in trip offered for an answer keeps the latest form.
  let lastSent: SentRequest | null = null;
  $('d-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    lastSent = {
      method: field('d-method').value,
      path: field('d-path').value,
      headers: field('d-headers').value,
      body: field('d-body').value,
    };
    const req = requestOf();
    if (typeof req === 'string') {
      alertBox('error', req);
      return;
    }
    alertBox('', '');
    const started = performance.now();
    fetch(req.path, req.init).then(
      (res) => res.text().then((text) => showResponse(res, text, started, lastSent)),
      (err: Error) => alertBox('error', `The request failed: ${err.message}`),
    );
  });
  resumeDebug();
}
