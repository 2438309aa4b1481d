import { PgSession } from './pg-protocol';
import type { WireProtocolModule } from './protocols';
import type { ReplyReader } from './settle';

/** PostgreSQL backend messages that may arrive between any two others: they belong to the client. */
const PG_ASYNC = new Set([0x41 /* A NotificationResponse */, 0x4e /* N NoticeResponse */, 0x53 /* S ParameterStatus */]);

/** PostgreSQL: a simple Query, answered by messages up to and including ReadyForQuery. */
function pgQueryReader(): ReplyReader {
  const header = Buffer.alloc(5);
  let headerFill = 0;
  let remaining = -1;
  let type = 0;
  let keep: Buffer[] | null = null;
  let kept: Buffer[] = [];
  return {
    read(chunk) {
      let i = 0;
      while (i < chunk.length) {
        if (remaining < 0) {
          const take = Math.min(5 - headerFill, chunk.length - i);
          chunk.copy(header, headerFill, i, i + take);
          headerFill += take;
          i += take;
          if (headerFill < 5) continue;
          type = header[0] as number;
          remaining = header.readInt32BE(1) - 4;
          headerFill = 0;
          keep = PG_ASYNC.has(type) ? [Buffer.from(header)] : null;
        }
        const take = Math.min(remaining, chunk.length - i);
        if (keep && take > 0) keep.push(chunk.subarray(i, i + take));
        i += take;
        remaining -= take;
        if (remaining === 0) {
          remaining = -1;
          if (keep) kept.push(...keep);
          keep = null;
          if (type === 0x5a /* Z ReadyForQuery */) {
            const passthrough = kept.length > 0 ? Buffer.concat(kept) : null;
            kept = [];
            return { used: i, done: true, passthrough };
          }
        }
      }
      return { used: i, done: false, passthrough: null };
    },
  };
}

function pgQuery(sql: string): Buffer {
  const text = Buffer.from(`${sql}\0`, 'utf8');
  const out = Buffer.alloc(5 + text.length);
  out[0] = 0x51; // Q
  out.writeInt32BE(4 + text.length, 1);
  text.copy(out, 5);
  return out;
}

/**
 * The statement the proxy settles a PostgreSQL connection with. The server counts it like any other in
 * pg_stat_statements, on the user's connection: the probe knows it by this text as sqltally's own.
 */
export const POSTGRES_SETTLE_SQL = 'SELECT pg_stat_force_next_flush()';

/** The proxy's side of the PostgreSQL protocol: its parser, and a statistics flush to settle a connection with. */
export const POSTGRES_WIRE = {
  session: (tls) => new PgSession({ tls }),
  // A failed flush (PostgreSQL before 15 has no such function) is answered and swallowed the same way.
  settle: { bytes: pgQuery(POSTGRES_SETTLE_SQL), reader: pgQueryReader },
} as const satisfies WireProtocolModule;
