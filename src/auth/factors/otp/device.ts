import type { SessionData } from '../../session/sessions.js';

/**
 * What a person is shown about the device that asked for a sign-in link, so they can refuse a
 * request they did not start: its browser and system (from the User-Agent), its network address,
 * and, when the device reported a position (POST /auth/location), that position rounded to a
 * tenth of a degree (about 10 km). The service has no GeoIP database: the address is shown as is.
 */
export interface RequestingDevice {
  /** "Chrome 131 on Linux"; "an unknown browser" when the User-Agent says nothing usable. */
  Browser: string;
  UserAgent: string;
  Address: string;
  /** Rounded position, when the device reported one. */
  Location?: { Latitude: number; Longitude: number };
}

const BROWSERS: [RegExp, string][] = [
  [/\bEdg(?:e|A|iOS)?\/(\d+)/, 'Edge'],
  [/\bOPR\/(\d+)/, 'Opera'],
  [/\bSamsungBrowser\/(\d+)/, 'Samsung Internet'],
  [/\bFirefox\/(\d+)/, 'Firefox'],
  [/\bFxiOS\/(\d+)/, 'Firefox'],
  [/\bCriOS\/(\d+)/, 'Chrome'],
  [/\bHeadlessChrome\/(\d+)/, 'Headless Chrome'],
  [/\bChrom(?:e|ium)\/(\d+)/, 'Chrome'],
  [/\bVersion\/(\d+)[^ ]* (?:Mobile\/\S+ )?Safari\//, 'Safari'],
  [/\bcurl\/(\d+)/, 'curl'],
];

const SYSTEMS: [RegExp, string][] = [
  [/\b(?:iPhone|iPad|iPod)\b/, 'iOS'],
  [/\bAndroid\b/, 'Android'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bLinux\b/, 'Linux'],
];

/** A short, human name for a User-Agent ("Firefox 133 on Windows"). */
export function describeBrowser(ua: string): string {
  let name = '';
  for (const [re, label] of BROWSERS) {
    const m = re.exec(ua);
    if (m) {
      name = `${label} ${m[1]}`;
      break;
    }
  }
  const system = SYSTEMS.find(([re]) => re.test(ua))?.[1];
  if (!name) return system ? `an unknown browser on ${system}` : 'an unknown browser';
  return system ? `${name} on ${system}` : name;
}

const round = (n: number) => Math.round(n * 10) / 10;

/** The requesting device as the link's page shows it, from the session's recorded data. */
export function requestingDevice(data: SessionData): RequestingDevice {
  const ua = String(data.UserAgent ?? '').slice(0, 512);
  return {
    Browser: describeBrowser(ua),
    UserAgent: ua,
    Address: String(data.Address ?? ''),
    ...(data.Location
      ? { Location: { Latitude: round(data.Location.Latitude), Longitude: round(data.Location.Longitude) } }
      : {}),
  };
}
