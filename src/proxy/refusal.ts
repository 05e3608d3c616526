/** What the proxy tells a client whose request it refuses (src/proxy/pages.ts shows it). */
import type { Learned } from './hosts.js';
import type { AuthOutcome } from './identity.js';
import type { PageDetail } from './pages.js';

/**
 * What a refused request is told: for a user the App is closed to, the App's name and its
 * access-request page (Location too, for front proxies that redirect on 403), never the service's
 * message with the App's internal ID; for a browser sent to sign in, a link to it.
 */
export function refusal(
  out: Extract<AuthOutcome, { ok: false }>,
  learned: Learned | undefined,
): { message: string; headers: Record<string, string> | undefined; detail: PageDetail } {
  const appName = learned?.appName || undefined;
  if (out.denied) {
    const link = learned?.accessRequestUrl;
    return {
      message: `Your account is not in a group that may use ${appName ?? 'this application'}.${link ? ' You can ask for access.' : ' Ask an administrator for access.'}`,
      headers: link ? { ...out.headers, location: link } : out.headers,
      detail: { appName, link: link ? { href: link, text: 'Ask for access' } : undefined },
    };
  }
  const signin = out.status === 401 ? out.headers?.location : undefined;
  return {
    message: out.message,
    headers: out.headers,
    detail: signin ? { appName, link: { href: signin, text: 'Sign in' } } : { appName },
  };
}
