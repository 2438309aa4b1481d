/** `sqltally/backends`: start, list and resolve the servers sqltally counts on, without a capture session. */
export { listBackends, resolveBackend, startBackend } from './registry';
export type * from './public-types';
export type { Resolution } from './types';
