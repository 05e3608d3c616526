import { backends, freshStore } from '../helpers.js';
import { storeConformance } from './suite.js';

for (const backend of backends()) storeConformance(backend, () => freshStore(backend));
