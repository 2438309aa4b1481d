import { AsyncResource, createHook, executionAsyncId } from 'node:async_hooks';
import net from 'node:net';
import { once } from 'node:events';
import { startWireProxy } from './proxy';
import type { WireProxy } from './proxy';
import { CAP, command, greeting, handshakeResponse, mysqlPacket, ok, pg } from './frames.fixture';

/**
 * Fault tests with real loopback sockets: a tiny fake server stands in for the database so each fault can be
 * produced on purpose. Every test ends with no socket left open on either side.
 */

const CLIENT_CAPS = CAP.PROTOCOL_41 | CAP.SECURE_CONNECTION | CAP.PLUGIN_AUTH | CAP.DEPRECATE_EOF;

interface FakeServer {
  server: net.Server;
  port: number;
  received: () => Buffer;
  sockets: net.Socket[];
  stop: () => Promise<void>;
}

/** A server that runs `behave` on each connection and records everything it received. */
async function fakeServer(
  behave: (socket: net.Socket, data: Buffer, all: () => Buffer) => void,
  onConnect?: (socket: net.Socket) => void,
): Promise<FakeServer> {
  const chunks: Buffer[] = [];
  const all = (): Buffer => {
    if (chunks.length > 1) chunks.splice(0, chunks.length, Buffer.concat(chunks));
    return chunks[0] ?? Buffer.alloc(0);
  };
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    onConnect?.(socket);
    socket.on('data', (data) => {
      chunks.push(data);
      behave(socket, data, all);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    server,
    port: (server.address() as net.AddressInfo).port,
    received: all,
    sockets,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A MySQL-speaking fake: greeting, OK to the handshake, OK to every COM_PING / COM_QUERY unless told otherwise. */
function mysqlFake(onCommand?: (socket: net.Socket, code: number) => boolean) {
  let state = 0;
  let parts: Buffer[] = [];
  let have = 0;
  let continuing = false;
  return fakeServer(
    (socket, data) => {
      parts.push(data);
      have += data.length;
      for (;;) {
        const head = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts.slice(0, 2));
        if (have < 4 || head.length < 5) break;
        const length = head.readUIntLE(0, 3);
        if (have < 4 + length) break;
        const code = continuing ? -1 : (head[4] as number);
        const seq = head[3] as number;
        continuing = length === 0xffffff;
        const rest = Buffer.concat(parts).subarray(4 + length);
        parts = rest.length > 0 ? [rest] : [];
        have = rest.length;
        if (continuing) continue;
        if (state === 0) {
          state = 1;
          socket.write(ok(2));
        } else if (!onCommand || !onCommand(socket, code)) {
          if (code !== 0x01) socket.write(ok(seq + 1));
        }
      }
    },
    (socket) => socket.write(greeting(1234)),
  );
}

async function connectClient(port: number): Promise<{ socket: net.Socket; data: () => Buffer; closed: Promise<void> }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (d) => chunks.push(d));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  await once(socket, 'connect');
  return { socket, data: () => Buffer.concat(chunks), closed };
}

async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'TCPServerWrap').length;
}

async function serverConnections(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
}

describe('WireProxy with real sockets', () => {
  let handlesBefore = 0;
  let proxy: WireProxy | null = null;
  let fake: FakeServer | null = null;
  beforeEach(() => {
    handlesBefore = tcpHandles();
  });
  afterEach(async () => {
    await proxy?.close();
    await fake?.stop();
    proxy = null;
    fake = null;
    await until(() => tcpHandles() <= handlesBefore, 'TCP handles to be released');
  });

  async function handshaken(): Promise<Awaited<ReturnType<typeof connectClient>>> {
    const c = await connectClient((proxy as WireProxy).port);
    await until(() => c.data().length >= greeting(1234).length, 'greeting');
    c.socket.write(handshakeResponse(CLIENT_CAPS));
    await until(() => c.data().length >= greeting(1234).length + ok(2).length, 'handshake OK');
    return c;
  }

  /** A MySQL fake behind a new proxy, and an in-process stream to it past its handshake, with what it received. */
  async function handshakenStream() {
    fake = await mysqlFake();
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    const stream = proxy.openStream();
    const got: Buffer[] = [];
    stream.on('data', (d: Buffer) => got.push(d));
    const data = () => Buffer.concat(got);
    await until(() => data().length >= greeting(1234).length, 'greeting');
    stream.write(handshakeResponse(CLIENT_CAPS));
    await until(() => data().length >= greeting(1234).length + ok(2).length, 'handshake OK');
    return { stream, data, opened: proxy };
  }

  it('forwards bytes unchanged both ways and counts a window, with set-up outside it', async () => {
    fake = await mysqlFake();
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port }, tls: 'passthrough' });
    const c = await handshaken();
    const before = proxy.snapshot();
    c.socket.write(Buffer.concat([command(0x0e), command(0x03, 'SELECT 1')]));
    await until(() => c.data().length >= greeting(1234).length + 3 * ok(1).length, 'two answers');
    const after = proxy.snapshot();
    const window = proxy.diff(before, after);
    expect(window).toMatchObject({ commands: { COM_PING: 1, COM_QUERY: 1 }, roundTrips: 2, clientWrites: 1, connections: 1, incomplete: false });
    expect(window.setup?.connectionsOpened).toBe(0);
    expect(proxy.diff(proxy.snapshot(), proxy.snapshot()).commandsTotal).toBe(0);
    expect(proxy.connections()[0]?.serverConnectionId).toBe(1234);
    expect(fake.received().equals(Buffer.concat([handshakeResponse(CLIENT_CAPS), command(0x0e), command(0x03, 'SELECT 1')]))).toBe(true);
    expect(c.data().equals(Buffer.concat([greeting(1234), ok(2), ok(1), ok(1)]))).toBe(true);
    c.socket.end(command(0x01));
    await c.closed;
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'connection closed');
    expect(proxy.connections()[0]?.counts.incomplete).toBe(false);
  });

  it('passes a 22 MB command intact with backpressure and counts it once', async () => {
    fake = await mysqlFake();
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    const c = await handshaken();
    const payload = Buffer.alloc(22 * 1024 * 1024, 0x62);
    payload[0] = 0x03;
    const big = mysqlPacket(0, payload);
    const before = proxy.snapshot();
    c.socket.write(big);
    await until(() => c.data().length >= greeting(1234).length + 2 * ok(1).length, 'answer to the big query', 20000);
    const window = proxy.diff(before, proxy.snapshot());
    expect(window).toMatchObject({ commands: { COM_QUERY: 1 }, roundTrips: 1, incompleteReasons: [] });
    expect(window.bytesClientToServer).toBe(big.length);
    expect(fake.received().subarray(-big.length).equals(big)).toBe(true);
  }, 30_000);

  it('marks garbage from the client incomplete and still forwards it', async () => {
    fake = await mysqlFake(() => true);
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    const c = await handshaken();
    const garbage = Buffer.from('\x05\x00\x00\x07hello');
    c.socket.write(garbage);
    await until(() => fake?.received().subarray(-garbage.length).equals(garbage) === true, 'garbage to arrive');
    const counts = proxy.connections()[0]?.counts;
    expect(counts?.incomplete).toBe(true);
    expect(counts?.incompleteReasons).toEqual(['parse stopped: bad sequence id 7 in a client packet during command']);
    c.socket.destroy();
  });

  it('marks an impossible PostgreSQL length incomplete and still forwards it', async () => {
    fake = await fakeServer((socket, _data, all) => {
      if (all().length === pg.startup().length) socket.write(Buffer.concat([pg.authOk(), pg.backendKeyData(99, 1), pg.ready()]));
    });
    proxy = await startWireProxy({ protocol: 'postgres', target: { host: '127.0.0.1', port: fake.port } });
    const c = await connectClient(proxy.port);
    c.socket.write(pg.startup());
    await until(() => c.data().length > 0 && c.data().at(-6) === 0x5a, 'ReadyForQuery');
    const bad = Buffer.from([0x51, 0, 0, 0, 2]);
    c.socket.write(bad);
    await until(() => fake?.received().subarray(-5).equals(bad) === true, 'bad message to arrive');
    const [connection] = proxy.connections();
    expect(connection?.serverConnectionId).toBe(99);
    expect(connection?.counts.incompleteReasons).toEqual(["parse stopped: impossible length 2 for message 'Q'"]);
    c.socket.destroy();
  });

  it('closes the client cleanly when the server dies mid-answer, and marks the cut', async () => {
    fake = await mysqlFake((socket, code) => {
      if (code !== 0x03) return false;
      socket.write(ok(1).subarray(0, 5));
      setTimeout(() => socket.destroy(), 10);
      return true;
    });
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    const c = await handshaken();
    c.socket.write(command(0x03, 'SELECT SLEEP(1)'));
    await c.closed;
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'proxy to see the close');
    const counts = proxy.connections()[0]?.counts;
    expect(counts?.incomplete).toBe(true);
    expect(counts?.incompleteReasons).toEqual([
      'connection closed (server closed) in the middle of a server packet',
      'connection closed (server closed) with 1 command(s) unanswered',
    ]);
    expect(await serverConnections(fake.server)).toBe(0);
  });

  it('closes the server side when the client disconnects with a command in flight', async () => {
    fake = await mysqlFake(() => true);
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    const c = await handshaken();
    c.socket.write(command(0x03, 'SELECT SLEEP(10)'));
    await until(() => fake?.received().includes(Buffer.from('SLEEP(10)')) === true, 'query to arrive');
    c.socket.destroy();
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'proxy to see the close');
    await until(() => fake?.sockets.every((s) => s.destroyed || s.readableEnded) === true, 'server socket to end');
    expect(proxy.connections()[0]?.counts.incompleteReasons).toEqual(['connection closed (client closed) with 1 command(s) unanswered']);
  });

  it('survives a server that refuses the connection', async () => {
    const closedPort = await (async () => {
      const s = net.createServer().listen(0, '127.0.0.1');
      await once(s, 'listening');
      const port = (s.address() as net.AddressInfo).port;
      await new Promise<void>((r) => s.close(() => r()));
      return port;
    })();
    proxy = await startWireProxy({ protocol: 'postgres', target: { host: '127.0.0.1', port: closedPort } });
    const c = await connectClient(proxy.port);
    c.socket.write(pg.startup());
    await c.closed;
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'proxy to see the close');
    expect(proxy.connections()[0]?.counts.incompleteReasons).toEqual(['could not connect to the server: ECONNREFUSED']);
  });

  it('lists a connection as closing from its goodbye, or a socket destroyed without one, until both sides are closed', async () => {
    fake = await mysqlFake();
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    proxy.onClosing(async () => held);
    const quitting = await handshaken();
    const destroyed = await handshaken();
    await until(() => proxy?.connections().length === 2, 'two connections');
    expect(proxy.closing()).toEqual([]);
    quitting.socket.write(command(0x01));
    // A pool reaping an idle connection may destroy its socket with no COM_QUIT.
    destroyed.socket.destroy();
    await until(() => proxy?.closing().length === 2, 'both to be closing');
    expect(proxy.closing()).toEqual([1, 2]);
    release();
    quitting.socket.end();
    await until(() => proxy?.connections().every((c) => c.closedAtNs !== null) === true, 'both closed');
    expect(proxy.closing()).toEqual([]);
  });

  it('a client that hangs up with its answer half delivered: the server side is read on, and the closing hook settles the connection', async () => {
    // pg-pool drops a client on its query's error, before the rest of the answer: the proxy must not wait for that to
    // drain to a client that is gone, or it stops reading the server and the closing hook's settle gets no answer.
    let held: net.Socket | null = null;
    fake = await mysqlFake((socket, code) => {
      if (code !== 0x03 || held) return false;
      held = socket;
      return true;
    });
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    let settled: boolean | undefined;
    proxy.onClosing(async (_connection, settle) => {
      settled = await settle();
    });
    const c = await handshaken();
    c.socket.write(command(0x03, 'SELECT 1'));
    await until(() => held !== null, 'query to arrive');
    // An OK whose info string is larger than the loopback buffers, to a client that reads none of it.
    c.socket.pause();
    const info = Buffer.alloc(8 * 1024 * 1024, 0x78);
    (held as net.Socket | null)?.write(mysqlPacket(1, Buffer.concat([Buffer.from([0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]), info])));
    await until(() => (proxy?.connections()[0]?.counts.bytesServerToClient ?? 0) > 0, 'the answer to start crossing');
    c.socket.write(command(0x01));
    await until(() => proxy?.closing().length === 1, 'the goodbye');
    c.socket.destroy();
    await until(() => settled !== undefined, 'the closing hook to settle the connection');
    expect(settled).toBe(true);
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'proxy to see the close');
  });

  it('forwards commands before counting them, but holds a goodbye at the end of a chunk until the closing hook ran', async () => {
    fake = await mysqlFake();
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let hookRan = 0;
    proxy.onClosing(async () => {
      hookRan += 1;
      await held;
    });
    const c = await handshaken();
    const setup = fake.received().length;
    c.socket.write(command(0x03, 'SELECT 1'));
    await until(() => c.data().length >= greeting(1234).length + 2 * ok(1).length, 'the answer');
    // One chunk: a query, then the goodbye. The query may reach the server; the goodbye must wait for the hook.
    c.socket.write(Buffer.concat([command(0x03, 'SELECT 2'), command(0x01)]));
    await until(() => hookRan === 1, 'the closing hook');
    await new Promise((r) => setTimeout(r, 50));
    expect(fake.received().subarray(setup).includes(command(0x01))).toBe(false);
    release();
    await until(() => fake?.received().subarray(setup).includes(command(0x01)) === true, 'the goodbye after the hook');
    expect(
      fake
        .received()
        .subarray(setup)
        .equals(Buffer.concat([command(0x03, 'SELECT 1'), command(0x03, 'SELECT 2'), command(0x01)])),
    ).toBe(true);
    await until(() => c.data().length >= greeting(1234).length + 3 * ok(1).length, 'the second answer');
    c.socket.end();
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'connection closed');
    expect(proxy.connections()[0]?.counts).toMatchObject({ commands: { COM_QUERY: 2, COM_QUIT: 1 }, incomplete: false });
  });

  it('PostgreSQL: a Terminate is held until the closing hook ran; queries before it pass first', async () => {
    const received: Buffer[] = [];
    fake = await fakeServer((socket, data) => {
      received.push(data);
      const all = Buffer.concat(received);
      // Answer the startup once, then one ReadyForQuery per Query.
      if (all.length === data.length) socket.write(Buffer.concat([pg.authOk(), pg.backendKeyData(4321, 1), pg.ready()]));
      else for (let k = 0; k < data.length; k += 1) if (data[k] === 0x51) socket.write(Buffer.concat([pg.commandComplete('SELECT 1'), pg.ready()]));
    });
    proxy = await startWireProxy({ protocol: 'postgres', target: { host: '127.0.0.1', port: fake.port } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let hookRan = 0;
    proxy.onClosing(async () => {
      hookRan += 1;
      await held;
    });
    const c = await connectClient(proxy.port);
    c.socket.write(pg.startup());
    await until(() => c.data().length > 0, 'startup answer');
    const terminate = pg.terminate();
    c.socket.write(Buffer.concat([pg.query('SELECT 1'), terminate]));
    await until(() => hookRan === 1, 'the closing hook');
    await new Promise((r) => setTimeout(r, 50));
    expect(Buffer.concat(received).includes(terminate)).toBe(false);
    release();
    await until(() => Buffer.concat(received).includes(terminate), 'the Terminate after the hook');
    c.socket.end();
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'connection closed');
    expect(proxy.connections()[0]?.counts).toMatchObject({ commands: { Query: 1, Terminate: 1 }, incomplete: false });
  });

  it('openStream(): an in-process stream relayed and counted like an accepted socket, closed both ways', async () => {
    const { stream, data, opened } = await handshakenStream();
    const before = opened.snapshot();
    stream.write(command(0x03, 'SELECT 1'));
    stream.write(command(0x03, 'SELECT 2'));
    await until(() => data().length >= greeting(1234).length + ok(2).length + 2 * ok(1).length, 'two answers');
    expect(opened.diff(before, opened.snapshot())).toMatchObject({ commands: { COM_QUERY: 2 }, roundTrips: 2, connections: 1, incomplete: false });
    expect(opened.connections()[0]?.serverConnectionId).toBe(1234);
    // The driver's goodbye and close reach the server side, as a socket's would.
    expect(stream.readyState).toBe('open');
    const closed = new Promise<void>((resolve) => stream.on('close', () => resolve()));
    stream.end(command(0x01));
    await closed;
    expect(stream.readyState).toBe('closed');
    await until(() => proxy?.connections()[0]?.closedAtNs !== null, 'connection closed');
    expect(opened.connections()[0]?.counts).toMatchObject({ commands: { COM_QUERY: 2, COM_QUIT: 1 }, incomplete: false });
    // A stream opened and then cut by close() is destroyed on the driver's side too.
    const second = opened.openStream();
    second.on('error', () => undefined);
    const secondClosed = new Promise<void>((resolve) => second.on('close', () => resolve()));
    await opened.close();
    await secondClosed;
    expect(second.destroyed).toBe(true);
  });

  it('openStream(): writes a driver corks leave as one chunk, as one writev over TCP does', async () => {
    const received: Buffer[] = [];
    fake = await fakeServer((socket, data) => {
      received.push(data);
      if (received.length === 1) socket.write(Buffer.concat([pg.authOk(), pg.backendKeyData(4321, 1), pg.ready()]));
      else if (data.includes(pg.sync()))
        socket.write(Buffer.concat([pg.parseComplete(), pg.bindComplete(), pg.noData(), pg.commandComplete('INSERT 0 1'), pg.ready()]));
    });
    proxy = await startWireProxy({ protocol: 'postgres', target: { host: '127.0.0.1', port: fake.port } });
    const stream = proxy.openStream();
    const got: Buffer[] = [];
    stream.on('data', (d: Buffer) => got.push(d));
    stream.write(pg.startup());
    await until(() => got.length > 0, 'startup answer');
    const before = proxy.snapshot();
    const messages = [pg.parse('', 'INSERT INTO t VALUES ($1)'), pg.bind('', '1'), pg.describePortal(), pg.execute(), pg.sync()];
    stream.cork();
    for (const m of messages) stream.write(m);
    stream.uncork();
    await until(() => Buffer.concat(got).includes(pg.commandComplete('INSERT 0 1')), 'the answer');
    expect(proxy.diff(before, proxy.snapshot())).toMatchObject({
      commands: { Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 },
      clientWrites: 1,
      incomplete: false,
    });
    expect(received.at(-1)?.equals(Buffer.concat(messages))).toBe(true);
    stream.end();
  });

  it("openStream(): a write's delivery, counting and forwarding run in the stream's async context, not the writer's", async () => {
    const { stream, data, opened } = await handshakenStream();
    // What a window's deferred-work tracking follows: resources made in the writer's context, transitively.
    const writer = new AsyncResource('test-writer');
    const inWriter = new Set<number>([writer.asyncId()]);
    const made: string[] = [];
    const hook = createHook({
      init(id, type) {
        if (!inWriter.has(executionAsyncId())) return;
        inWriter.add(id);
        made.push(type);
      },
    }).enable();
    try {
      writer.runInAsyncScope(() => stream.write(command(0x03, 'SELECT 1')));
      await until(() => data().length >= greeting(1234).length + ok(2).length + ok(1).length, 'the answer');
    } finally {
      hook.disable();
    }
    // The stream's delivery tick and the proxy's write to the server are the transport's work: none is the writer's.
    expect(made).toEqual([]);
    expect(opened.connections()[0]?.counts).toMatchObject({ commands: { COM_QUERY: 1 }, incomplete: false });
    stream.end();
  });

  it('close() ends open connections on both sides and leaks nothing', async () => {
    fake = await mysqlFake();
    proxy = await startWireProxy({ protocol: 'mysql', target: { host: '127.0.0.1', port: fake.port } });
    const a = await handshaken();
    const b = await handshaken();
    expect(await serverConnections(fake.server)).toBe(2);
    await proxy.close();
    await Promise.all([a.closed, b.closed]);
    await until(() => fake?.sockets.every((s) => s.destroyed || s.readableEnded) === true, 'server sockets to end');
    expect(proxy.connections().every((c) => c.closedAtNs !== null)).toBe(true);
    await proxy.close();
  });
});
