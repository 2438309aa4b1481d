// The public face of backends: what other folders import.
export { BACKENDS, envKey, listBackends, localInstalls, parseBackendId, resolveBackend, startBackend, variantIds } from './registry';
export type { BackendId } from './registry';
export type { BackendModule, ContainerPlan, InstallFinder, InstallSearch, LocalInstall, ServerIdentity, StartOptions } from './backend';
export { CAPABILITIES } from './capabilities';
export { DATADIR_PREFIX } from './local-process';
export { describeSweep, privateDirBases, sweepStalePrivateDirs } from './stale';
export type { RemovedDir, StaleSweep, StuckDir } from './stale';
export { redactUrl, parseExternalUrl } from './url';
export { SqltallyError, redactSecrets, truncateStatement } from '../shared/errors';
export type { Phase, SqltallyErrorContext } from '../shared/errors';
export * from './types';
