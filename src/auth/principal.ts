// Principal is declared below the store (src/schema/principal.ts) so the one write path and the
// policy can take it; features keep importing it from here.
export type { Principal } from '../schema/principal.js';
