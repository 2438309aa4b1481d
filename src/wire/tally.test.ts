import { diffWireSnapshots, emptyWireCounts, sumWireCounts } from './tally';
import type { WireConnection, WireCounts, WireSnapshot } from './types';

function counts(over: Partial<WireCounts>): WireCounts {
  return { ...emptyWireCounts('mysql'), connections: 1, setup: { ...emptyWireCounts('mysql').setup!, connectionsOpened: 1 }, ...over };
}
function conn(id: number, over: Partial<WireCounts>, closedAtNs: number | null = null): WireConnection {
  return { id, serverConnectionId: 100 + id, openedAtNs: 1, closedAtNs, counts: counts(over) };
}
function snap(takenAtNs: number, connections: WireConnection[], proxyId = 'p', protocol: WireSnapshot['protocol'] = 'mysql'): WireSnapshot {
  return { proxyId, protocol, takenAtNs, connections };
}

describe('diffWireSnapshots', () => {
  it('makes a window incomplete when a still-open connection has half a client message in (a network cut mid-write)', () => {
    const before = snap(10, [conn(1, { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, bytesClientToServer: 20 })]);
    const half = snap(20, [conn(1, { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, bytesClientToServer: 2020, clientMidMessage: true })]);
    const d = diffWireSnapshots(before, half);
    expect(d.incomplete).toBe(true);
    expect(d.incompleteReasons).toEqual(['connection 1: a client message was half received when the window closed (the rest never came, or has not yet)']);
    expect(d).not.toHaveProperty('clientMidMessage');
    // Once the connection is closed, its own end() said why (mid-packet); the open-connection check does not repeat it.
    const closed = snap(20, [conn(1, { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, bytesClientToServer: 2020, clientMidMessage: true }, 15)]);
    expect(diffWireSnapshots(before, closed).incompleteReasons).toEqual([]);
  });

  it("counts an empty window in the proxy's own protocol", () => {
    expect(diffWireSnapshots(snap(1, [], 'p', 'postgres'), snap(2, [], 'p', 'postgres')).protocol).toBe('postgres');
    expect(diffWireSnapshots(snap(1, [], 'p', 'mysql'), snap(2, [], 'p', 'mysql')).protocol).toBe('mysql');
  });

  it('subtracts per connection, counts only connections with traffic, and puts new handshakes in setup', () => {
    const before = snap(10, [
      conn(1, { commands: { COM_QUERY: 2 }, commandsTotal: 2, roundTrips: 2, bytesClientToServer: 50, bytesServerToClient: 20, clientWrites: 2 }),
      conn(2, { commands: { COM_PING: 1 }, commandsTotal: 1, roundTrips: 1, bytesClientToServer: 5, bytesServerToClient: 11, clientWrites: 1 }),
      conn(3, {}, 5),
    ]);
    const after = snap(20, [
      conn(1, {
        commands: { COM_QUERY: 5 },
        commandsTotal: 5,
        roundTrips: 5,
        bytesClientToServer: 140,
        bytesServerToClient: 80,
        clientWrites: 4,
        rowsAffected: 7,
      }),
      conn(2, { commands: { COM_PING: 1 }, commandsTotal: 1, roundTrips: 1, bytesClientToServer: 5, bytesServerToClient: 11, clientWrites: 1 }),
      conn(3, {}, 5),
      conn(4, {
        commands: { COM_STMT_EXECUTE: 1 },
        commandsTotal: 1,
        roundTrips: 1,
        bytesClientToServer: 30,
        bytesServerToClient: 11,
        clientWrites: 1,
        setup: { connectionsOpened: 1, bytesClientToServer: 90, bytesServerToClient: 120, clientMessages: 1, serverMessages: 2, tlsRefused: 0 },
      }),
    ]);
    const d = diffWireSnapshots(before, after);
    expect(d).toMatchObject({
      commands: { COM_QUERY: 3, COM_STMT_EXECUTE: 1 },
      commandsTotal: 4,
      roundTrips: 4,
      bytesClientToServer: 120,
      bytesServerToClient: 71,
      clientWrites: 3,
      connections: 2,
      rowsAffected: 7,
      incomplete: false,
      setup: { connectionsOpened: 1, bytesClientToServer: 90, bytesServerToClient: 120, clientMessages: 1, serverMessages: 2 },
    });
  });

  it('is incomplete when a connection with traffic could not be parsed, or a request straddles an edge; idle broken ones do not count', () => {
    const broken = { incomplete: true, incompleteReasons: ['parse stopped: x'] };
    const before = snap(1, [conn(1, { ...broken, bytesClientToServer: 9 }), conn(2, { bytesClientToServer: 1, unansweredRequests: 1 })]);
    const after = snap(2, [conn(1, { ...broken, bytesClientToServer: 9 }), conn(2, { bytesClientToServer: 2, roundTrips: 1, unansweredRequests: 0 })]);
    expect(diffWireSnapshots(before, after).incompleteReasons).toEqual(['connection 2: 1 request(s) in flight when the window opened']);
    const later = snap(3, [conn(1, { ...broken, bytesClientToServer: 20 }), conn(2, { bytesClientToServer: 2, roundTrips: 1, unansweredRequests: 1 })]);
    expect(diffWireSnapshots(after, later).incompleteReasons).toEqual([
      'connection 1: parse stopped: x',
      'connection 2: 1 request(s) still unanswered when the window closed',
    ]);
  });

  it('refuses snapshots of two proxies or in the wrong order', () => {
    expect(() => diffWireSnapshots(snap(1, [], 'a'), snap(2, [], 'b'))).toThrow(/two proxies/);
    expect(() => diffWireSnapshots(snap(2, []), snap(1, []))).toThrow(/taken after/);
  });

  it('leaves rowsAffected out of a window when a connection could not know it', () => {
    const before = snap(1, [conn(1, { rowsAffected: 1 }), conn(2, {})]);
    const noRows = counts({ bytesClientToServer: 3 });
    delete noRows.rowsAffected;
    const after = snap(2, [conn(1, { rowsAffected: 4, bytesClientToServer: 1 }), { ...conn(2, {}), counts: noRows }]);
    expect(diffWireSnapshots(before, after).rowsAffected).toBeUndefined();
  });
});

describe('sumWireCounts', () => {
  it('adds counts and reasons, and refuses mixing protocols', () => {
    const a = counts({ commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1 });
    const b = counts({ commands: { COM_QUERY: 2 }, commandsTotal: 2, roundTrips: 2, incomplete: true, incompleteReasons: ['r'] });
    expect(sumWireCounts([a, b])).toMatchObject({
      commands: { COM_QUERY: 3 },
      commandsTotal: 3,
      roundTrips: 3,
      connections: 2,
      incomplete: true,
      incompleteReasons: ['r'],
    });
    expect(sumWireCounts([])).toBeNull();
    expect(() => sumWireCounts([a, { ...emptyWireCounts('postgres') }])).toThrow(/cannot sum/);
  });
});
