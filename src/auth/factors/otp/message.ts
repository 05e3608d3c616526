import { parseListen } from '../../../config/setting.js';
import { esc } from '../../../core/html.js';
import type { Doc } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import type { PendingLink } from './links.js';
import type { Message } from './mailer.js';

/**
 * Where links point: the sign-in pages' public URL from the configuration (Tenant.SigninURL, else
 * server.signinurl, else server.publicurl + /signin, else the listen address), never from the request: a Host header chosen by
 * whoever asks for a link must not decide where the mailbox owner's click (and its token) goes.
 */
export function linkBase(ctx: ServiceContext, tenant: Doc): string {
  const configured = String(tenant.SigninURL ?? '') || ctx.config.server.signinurl;
  if (configured) return configured.replace(/\/+$/, '');
  if (ctx.config.server.publicurl) return `${ctx.config.server.publicurl.replace(/\/+$/, '')}/signin`;
  const { host, port } = parseListen(ctx.config.server.listen);
  const name = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  const scheme = ctx.config.server.cert ? 'https' : 'http';
  return `${scheme}://${name}:${port}/signin`;
}

/**
 * The link's page is {base}/otp; the token rides in the fragment, which browsers never send:
 * it stays out of access logs, proxies and Referer headers, and a mail scanner that fetches the
 * URL learns nothing and spends nothing (the page's script posts it after a click).
 */
export const linkUrl = (base: string, token: string) => `${base}/otp#${token}`;

/** The message: who asked, from what, and what the link does (and does not do). */
export function linkMessage(
  tenant: string,
  to: string,
  link: PendingLink,
  base: string,
  token: string,
): Message {
  const url = linkUrl(base, token);
  const d = link.Device;
  const where = d.Location
    ? `${d.Address}, near ${d.Location.Latitude}, ${d.Location.Longitude}`
    : d.Address || 'an unknown address';
  const minutes = Math.round((link.Expires - Date.parse(link.Time)) / 60_000);
  const lines = [
    `Someone asked to sign in to ${tenant} as ${to}.`,
    '',
    `Browser: ${d.Browser}`,
    `From: ${where}`,
    `At: ${link.Time}`,
    '',
    `If that was you, open this link within ${minutes} minutes and approve the sign-in:`,
    url,
    '',
    'The link approves the browser that asked; it does not sign in the device you open it on.',
    'If it was not you, open the link and choose "This was not me", or ignore this message.',
  ];
  const html = `<!doctype html><html><body style="font-family:system-ui,sans-serif">
<p>Someone asked to sign in to <strong>${esc(tenant)}</strong> as ${esc(to)}.</p>
<table><tr><td>Browser</td><td>${esc(d.Browser)}</td></tr><tr><td>From</td><td>${esc(where)}</td></tr><tr><td>At</td><td>${esc(link.Time)}</td></tr></table>
<p>If that was you, open this link within ${minutes} minutes and approve the sign-in:</p>
<p><a href="${esc(url)}">${esc(url)}</a></p>
<p>The link approves the browser that asked; it does not sign in the device you open it on.
If it was not you, open the link and choose "This was not me", or ignore this message.</p>
</body></html>`;
  return { to, subject: `Sign-in link for ${tenant}`, text: lines.join('\n'), html };
}
