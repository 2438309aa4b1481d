/** The server types a user writes: exported by `sqltally` and by `sqltally/backends`, listed once here for both. */
export type {
  BackendName,
  BackendDescription,
  Capabilities,
  ConnectionInfo,
  Flavour,
  NetworkConnection,
  ProviderKind,
  SqliteConnection,
  StartedBackend,
} from './types';
