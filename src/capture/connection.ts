import type { NetworkConnection, SqliteConnection } from '../shared/servers';

/**
 * Where a user's client connects so that a capture window sees it: the wire proxy's address (or the server's, when
 * the proxy is off) with the server's credentials (never print the password, nor `url`), or the SQLite file.
 */
export type SessionConnection =
  | (NetworkConnection & {
      /** `mysql://user:password@host:port/database` or `postgres://...`, for clients configured by URL. */
      url: string;
    })
  | SqliteConnection;

/**
 * Options for a client of your own in this process, from {@link CaptureSession.clientOptions}: the address and
 * credentials of `connection`, and, when the session has a wire proxy and the driver can take one, that driver's
 * option for an in-process stream to the proxy (pg, mysql2 and mariadb `stream`, postgres.js `socket`), so each round
 * trip crosses one TCP connection instead of two. Spread it into the driver's options; never print it.
 */
export interface ClientOptions {
  host: string;
  port: number;
  user: string;
  /** The server's password: never print it. */
  password: string;
  database: string;
  /** The driver's own stream option, a function so each connection of a pool opens its own stream. */
  [driverOption: string]: unknown;
}
