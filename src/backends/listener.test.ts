// @waits 22: drivers waiting out connect timeouts on listeners that are not databases.
import net from 'node:net';
import { SqltallyError } from '../shared/errors';
import { diagnoseConnectFailure } from './external';
import { looksLikeMysqlGreeting, looksLikePostgresAnswer, mysqlGreetingOffersTls } from './protocols';
import { diagnoseListener, serverOffersTls } from './listener';
import type { ListenerKind, WireProtocol } from './listener';
import { freePort } from './local-process';
import { startBackend } from './registry';
import type { NetworkConnection } from './types';

/** A loopback TCP service that behaves like `behaviour`; closed after each test. */
type Behaviour = (socket: net.Socket) => void;

/** A protocol-10 greeting as MySQL sends it, its lower capability flags `caps` (CLIENT_SSL is 0x800). */
function mysqlGreeting(caps: number): Buffer {
  const capsLow = Buffer.alloc(2);
  capsLow.writeUInt16LE(caps);
  // Version, thread id, 8 bytes of scramble, a filler, the lower capabilities, then charset, status and the rest.
  const payload = Buffer.concat([
    Buffer.from([0x0a]),
    Buffer.from('9.7.4\0'),
    Buffer.alloc(4, 7),
    Buffer.alloc(8, 0x41),
    Buffer.from([0]),
    capsLow,
    Buffer.alloc(20),
  ]);
  return Buffer.concat([Buffer.from([payload.length & 0xff, (payload.length >> 8) & 0xff, 0, 0]), payload]);
}

const BEHAVIOURS = {
  silent: () => undefined,
  /** Says nothing until it gets a line, then complains, as Redis does. */
  redisLike: (s: net.Socket) => {
    s.on('data', (d) => {
      if (d.includes('\n')) s.write('-ERR unknown command\r\n');
    });
  },
  http: (s: net.Socket) => void s.write('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'),
  hangUp: (s: net.Socket) => void s.destroy(),
  mysqlGreeting: (s: net.Socket) => {
    const payload = Buffer.concat([Buffer.from([0x0a]), Buffer.from('8.4.0\0'), Buffer.alloc(20)]);
    const header = Buffer.from([payload.length & 0xff, (payload.length >> 8) & 0xff, 0, 0]);
    s.write(Buffer.concat([header, payload]));
  },
  postgresNoTls: (s: net.Socket) => s.once('data', () => s.write('N')),
  postgresTls: (s: net.Socket) => s.once('data', () => s.write('S')),
  mysqlTls: (s: net.Socket) => void s.write(mysqlGreeting(0xffff)),
  mysqlPlain: (s: net.Socket) => void s.write(mysqlGreeting(0xffff & ~0x800)),
  mysqlRefusing: (s: net.Socket) => {
    const payload = Buffer.concat([Buffer.from([0xff, 0x69, 0x04]), Buffer.from("Host '1.2.3.4' is blocked")]);
    s.end(Buffer.concat([Buffer.from([payload.length, 0, 0, 0]), payload]));
  },
} satisfies Record<string, Behaviour>;

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
async function listen(behaviour: Behaviour): Promise<number> {
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
    behaviour(s);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as net.AddressInfo).port;
}

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

const FAST_MS = 300;

describe('diagnoseListener', () => {
  const cases: [keyof typeof BEHAVIOURS | 'nothing', WireProtocol, ListenerKind][] = [
    ['nothing', 'mysql', 'refused'],
    ['nothing', 'postgres', 'refused'],
    ['silent', 'mysql', 'silent'],
    ['silent', 'postgres', 'silent'],
    ['redisLike', 'mysql', 'foreign'],
    ['redisLike', 'postgres', 'foreign'],
    ['http', 'mysql', 'foreign'],
    ['http', 'postgres', 'foreign'],
    ['hangUp', 'mysql', 'closed'],
    ['hangUp', 'postgres', 'closed'],
    ['mysqlGreeting', 'mysql', 'speaks'],
    ['mysqlGreeting', 'postgres', 'foreign'],
    ['postgresNoTls', 'postgres', 'speaks'],
    ['postgresNoTls', 'mysql', 'foreign'],
  ];
  it.each(cases)('%s, asked for %s: %s', async (behaviour, protocol, kind) => {
    const port = behaviour === 'nothing' ? await freePort() : await listen(BEHAVIOURS[behaviour]);
    const d = await diagnoseListener('127.0.0.1', port, protocol, FAST_MS);
    expect(d.kind).toBe(kind);
  });

  it('shows what a foreign service said, unprintable bytes as dots', async () => {
    const port = await listen((s) => void s.write(Buffer.from([0x2b, 0x4f, 0x4b, 0x00, 0x0d, 0x0a])));
    expect(await diagnoseListener('127.0.0.1', port, 'mysql', FAST_MS)).toMatchObject({ kind: 'foreign', answer: '+OK...' });
  });

  it('recognises greetings and SSLRequest answers byte by byte', () => {
    expect(looksLikeMysqlGreeting(Buffer.from([0x05, 0, 0, 0, 0x0a]))).toBe(true);
    expect(looksLikeMysqlGreeting(Buffer.from([0x05, 0, 0, 0, 0xff]))).toBe(true);
    expect(looksLikeMysqlGreeting(Buffer.from('HTTP/1.1 400'))).toBe(false);
    expect(looksLikeMysqlGreeting(Buffer.from([0x05, 0, 0, 1, 0x0a]))).toBe(false);
    expect(looksLikePostgresAnswer(Buffer.from('S'))).toBe(true);
    expect(looksLikePostgresAnswer(Buffer.from('N'))).toBe(true);
    expect(looksLikePostgresAnswer(Buffer.from('NOPE'))).toBe(false);
    expect(looksLikePostgresAnswer(Buffer.from('ERROR: nope'))).toBe(false);
  });
});

describe('serverOffersTls: asked of the server, never logging in', () => {
  it.each<[keyof typeof BEHAVIOURS, WireProtocol, boolean | null]>([
    ['mysqlTls', 'mysql', true],
    ['mysqlPlain', 'mysql', false],
    ['mysqlRefusing', 'mysql', null],
    ['postgresTls', 'postgres', true],
    ['postgresNoTls', 'postgres', false],
    ['silent', 'postgres', null],
    ['http', 'mysql', null],
  ])('%s, asked for %s: %s', async (behaviour, protocol, offered) => {
    expect(await serverOffersTls('127.0.0.1', await listen(BEHAVIOURS[behaviour]), protocol, FAST_MS)).toBe(offered);
  });

  it('reads CLIENT_SSL only from a whole greeting, split anywhere', () => {
    const greeting = mysqlGreeting(0x800);
    for (let cut = 0; cut < greeting.length; cut++) {
      const capsEnd = 4 + 1 + 6 + 4 + 8 + 1 + 2;
      expect([cut, mysqlGreetingOffersTls(greeting.subarray(0, cut))]).toEqual([cut, cut >= capsEnd ? true : null]);
    }
    expect(mysqlGreetingOffersTls(mysqlGreeting(0x200))).toBe(false);
  });
});

describe('diagnoseConnectFailure', () => {
  const conn = (port: number): NetworkConnection => ({ kind: 'network', host: '127.0.0.1', port, user: 'u', password: 'sekrit', database: 'd' });
  const ORIGIN = 'mysql://u:***@127.0.0.1/d';
  const timeout = Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' });

  it.each([
    ['nothing', 'nothing listens on 127.0.0.1:PORT (ECONNREFUSED), from SQLTALLY_MARIADB_URL=mysql://u:***@127.0.0.1/d'],
    ['silent', '127.0.0.1:PORT accepted the connection but sent no answer in 0.3 s: not a MySQL/MariaDB server'],
    ['redisLike', '127.0.0.1:PORT answered, but not as a MySQL/MariaDB server (it sent "-ERR unknown command..")'],
    ['hangUp', '127.0.0.1:PORT accepted the connection and closed it without a MySQL greeting'],
  ] as const)('%s: one message naming what is there', async (behaviour, text) => {
    const port = behaviour === 'nothing' ? await freePort() : await listen(BEHAVIOURS[behaviour]);
    const err = await diagnoseConnectFailure(timeout, 'mysql', 'mariadb', 'SQLTALLY_MARIADB_URL', ORIGIN, conn(port), FAST_MS);
    expect(err).toBeInstanceOf(SqltallyError);
    expect(err.message).toContain('[backend mariadb, provider external, phase connect]');
    expect(err.message).toContain(text.replace('PORT', String(port)));
    expect(err.message).toContain(ORIGIN);
    expect(err.message).not.toContain('sekrit');
  });

  it('leaves an answer from a real server (access denied) to the driver error', async () => {
    const denied = Object.assign(new Error('Access denied'), { code: 'ER_ACCESS_DENIED_ERROR' });
    const err = await diagnoseConnectFailure(denied, 'mysql', 'mariadb', 'SQLTALLY_MARIADB_URL', ORIGIN, conn(1), FAST_MS);
    expect(err.message).toContain('access denied for user "u"');
  });
});

describe('an external URL at something that is not a database, end to end through the driver', () => {
  it.each([
    ['mariadb', 'mysql', 'http', 'answered, but not as a MySQL/MariaDB server (it sent "HTTP/1.1 400 Bad Request..'],
    ['postgres', 'postgres', 'redisLike', 'answered, but not as a PostgreSQL server (it sent "-ERR unknown command..")'],
    ['postgres', 'postgres', 'silent', 'accepted the connection but sent no answer in 3 s: not a PostgreSQL server'],
  ] as const)(
    '%s at a %s URL on a %s listener',
    async (backend, scheme, behaviour, text) => {
      const port = await listen(BEHAVIOURS[behaviour]);
      const variable = `SQLTALLY_${backend.toUpperCase()}_URL`;
      const err = await startBackend(backend, { PATH: process.env['PATH'], [variable]: `${scheme}://u:sekrit@127.0.0.1:${port}/d?password=sekrit` }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SqltallyError);
      const message = (err as SqltallyError).message;
      expect(message).toContain(`[backend ${backend}, provider external, phase connect] 127.0.0.1:${port} ${text}`);
      expect(message).toContain(`from ${variable}=${scheme}://u:***@127.0.0.1:${port}/d?password=***`);
      expect(message).not.toContain('sekrit');
    },
    30_000,
  );
});
