// The scope matrix, field rules and privilege rules moved into the decision point (src/policy);
// features keep importing the scope helpers from here.
export { access, FIELD_RULES, hasAnyScope, holdsAll, MATRIX } from '../policy/grants.js';
