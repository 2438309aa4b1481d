/** Reads the server's answer to the proxy's own request out of the byte stream, so the client never sees it. */
export interface ReplyReader {
  /**
   * Consumes bytes of the answer from `chunk`; returns how many it used, whether the answer is complete, and bytes
   * in it that belong to the client after all (asynchronous messages the server may send at any time).
   */
  read(chunk: Buffer): { used: number; done: boolean; passthrough: Buffer | null };
}

/** The request a protocol settles a connection with, and how its answer is framed. */
export interface SettleRequest {
  bytes: Buffer;
  reader(): ReplyReader;
}
