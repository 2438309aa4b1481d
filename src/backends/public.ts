/** `sqltally/backends`: start, list and resolve the servers sqltally counts on, without a capture session. */
export { listBackends, resolveBackend, startBackend } from './registry';
export type {
  BackendName,
  BackendDescription,
  Capabilities,
  ConnectionInfo,
  Flavour,
  NetworkConnection,
  ProviderKind,
  Resolution,
  SqliteConnection,
  StartedBackend,
} from './types';
