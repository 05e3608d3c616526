import { storeConformance } from '../../src/store/test/conformance.js';
import { backends, freshStore } from '../helpers.js';

for (const backend of backends()) storeConformance(backend, () => freshStore(backend));
