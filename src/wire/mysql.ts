import { MysqlSession } from './mysql-protocol';
import type { WireProtocolModule } from './protocols';
import type { ReplyReader } from './settle';

/** COM_PING with sequence id 0. */
const COM_PING = Buffer.from([1, 0, 0, 0, 0x0e]);

/** MySQL: COM_PING (sequence 0), answered by one OK or ERR packet. */
function mysqlPingReader(): ReplyReader {
  const header = Buffer.alloc(4);
  let headerFill = 0;
  let remaining = -1;
  return {
    read(chunk) {
      let i = 0;
      while (i < chunk.length) {
        if (remaining < 0) {
          const take = Math.min(4 - headerFill, chunk.length - i);
          chunk.copy(header, headerFill, i, i + take);
          headerFill += take;
          i += take;
          if (headerFill < 4) continue;
          remaining = header.readUIntLE(0, 3);
        }
        const take = Math.min(remaining, chunk.length - i);
        i += take;
        remaining -= take;
        if (remaining === 0) return { used: i, done: true, passthrough: null };
      }
      return { used: i, done: false, passthrough: null };
    },
  };
}

/** The proxy's side of the MySQL protocol: its parser, and COM_PING to settle an idle connection with. */
export const MYSQL_WIRE = {
  session: (tls) => new MysqlSession({ tls }),
  settle: { bytes: COM_PING, reader: mysqlPingReader },
} as const satisfies WireProtocolModule;
