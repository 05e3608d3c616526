/**
 * Regions for location policies (docs/signin.md, "Location policy"): a circle on the earth,
 * written as one string so that it fits a list field: `[<name>:] <latitude>,<longitude>,<radius km>`,
 * for example `Amsterdam office: 52.3676,4.9041,25`.
 */
export interface Region {
  name: string;
  latitude: number;
  longitude: number;
  radiusKm: number;
}

const NUM = String.raw`\s*([+-]?\d{1,3}(?:\.\d{1,12})?)\s*`;
const REGION = new RegExp(String.raw`^(?:([^:]{1,64}):)?${NUM},${NUM},\s*(\d{1,5}(?:\.\d{1,6})?)\s*$`);

/** The region a string describes, or a message saying what is wrong with it. */
export function parseRegion(v: string): Region | string {
  const m = REGION.exec(v);
  if (!m) return 'must be "[name:] latitude,longitude,radius in km", e.g. "Office: 52.3676,4.9041,25"';
  const latitude = Number(m[2]);
  const longitude = Number(m[3]);
  const radiusKm = Number(m[4]);
  if (Math.abs(latitude) > 90) return 'latitude must be between -90 and 90';
  if (Math.abs(longitude) > 180) return 'longitude must be between -180 and 180';
  if (!(radiusKm > 0 && radiusKm <= 20_040)) return 'the radius must be more than 0 and at most 20040 km';
  return { name: (m[1] ?? '').trim(), latitude, longitude, radiusKm };
}

/** A field check: undefined when the string is a region. */
export const checkRegion = (v: string) => {
  const r = parseRegion(v);
  return typeof r === 'string' ? r : undefined;
};

const EARTH_KM = 6371.0088;
const rad = (d: number) => (d * Math.PI) / 180;

/** Great-circle distance (haversine) in km. */
export function distanceKm(aLat: number, aLong: number, bLat: number, bLong: number): number {
  const dLat = rad(bLat - aLat);
  const dLong = rad(bLong - aLong);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(aLat)) * Math.cos(rad(bLat)) * Math.sin(dLong / 2) ** 2;
  return 2 * EARTH_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** Is the point inside one of the regions (strings that do not parse count as no region)? */
export function insideRegions(lat: number, long: number, regions: readonly string[]): boolean {
  return regions.some((s) => {
    const r = parseRegion(s);
    return typeof r !== 'string' && distanceKm(lat, long, r.latitude, r.longitude) <= r.radiusKm;
  });
}
