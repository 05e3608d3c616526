import { ApiError } from '../../../core/errors.js';
import { ensureSession, updateRequestSession } from '../../session/sessions.js';
import { type Factor, FLOW, field, formOf } from '../factor.js';
import { signInStep } from '../stepschemas.js';

function coordinate(v: string, name: string, limit: number): number {
  if (!/^[+-]?\d{1,3}(\.\d{1,12})?$/.test(v))
    throw new ApiError('InvalidField', `${name} must be a decimal number`, { field: name });
  const n = Number(v);
  if (Math.abs(n) > limit)
    throw new ApiError('InvalidField', `${name} must be between -${limit} and ${limit}`, { field: name });
  return n;
}

/** POST /auth/location (form lat, long): the reported position, kept with the session for policies. */
export const locationFactor: Factor = {
  name: 'location',
  register(app, ctx) {
    app.post('/auth/location', { ...FLOW, schema: LOCATION_STEP }, async (req, reply) => {
      const form = formOf(req);
      const lat = coordinate(field(form, 'lat', { required: true, max: 32 }), 'lat', 90);
      const long = coordinate(field(form, 'long', { required: true, max: 32 }), 'long', 180);
      const s = await ensureSession(req, reply, ctx);
      await updateRequestSession(req, reply, ctx, {
        ...s,
        data: { ...s.data, Location: { Latitude: lat, Longitude: long, Time: new Date().toISOString() } },
      });
      return reply.code(204).send();
    });
  },
};

const LOCATION_STEP = signInStep(
  'Sign-in: location',
  'Report the device’s location (for the policy’s regions)',
  { lat: { type: 'string' }, long: { type: 'string' } },
  ['lat', 'long'],
);
