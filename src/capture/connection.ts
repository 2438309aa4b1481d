/** Where a user's client connects so that a capture window sees it. */
export type SessionConnection =
  | {
      kind: 'network';
      /** The wire proxy's address (or the server's, when the proxy is off). */
      host: string;
      port: number;
      user: string;
      /** The server's password: never print it, nor `url`. */
      password: string;
      database: string;
      /** `mysql://user:password@host:port/database` or `postgres://...`, for clients configured by URL. */
      url: string;
    }
  | { kind: 'file'; filename: string };
