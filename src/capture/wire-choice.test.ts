import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassiveCaptureUnavailable, startPassiveCapture } from '../wire/passive';
import { chooseWire, describeWireChoice, proxyAfterFailedStart, WireChoiceSchema } from './wire-choice';
import type { WireFacts } from './wire-choice';

/** Everything a passive capture needs: each row below takes one thing away. */
const ABLE: WireFacts = {
  windowsAcrossConnections: null,
  host: '127.0.0.1',
  privateServer: true,
  serverProcessHere: true,
  tcpdump: '/usr/bin/tcpdump',
  tlsOffered: false,
};

describe('chooseWire: --wire auto', () => {
  it.each<[string, Partial<WireFacts>, string, RegExp]>([
    ['able', {}, 'passive', /^a private server on loopback offering no TLS/],
    ['localhost is loopback', { host: 'localhost' }, 'passive', /^a private server/],
    ['another loopback address', { host: '127.0.0.2' }, 'passive', /^a private server/],
    [
      'named windows',
      { windowsAcrossConnections: '--named-windows' },
      'proxy',
      /^--named-windows: a connection open at a window's edge can be settled only through the proxy$/,
    ],
    ['not loopback', { host: '10.0.0.5' }, 'proxy', /^the server is at 10\.0\.0\.5, not on a loopback IPv4 address$/],
    ['IPv6 loopback', { host: '::1' }, 'proxy', /^the server is at ::1, not on a loopback IPv4 address$/],
    ['a container published on a host name', { host: 'docker.internal' }, 'proxy', /not on a loopback IPv4 address/],
    ['a server sqltally did not start', { privateServer: false }, 'proxy', /^sqltally did not start the server: .* other clients' connections/],
    ['a container sqltally started', { serverProcessHere: false }, 'proxy', /^the server runs in a container/],
    ['tcpdump missing', { tcpdump: null }, 'proxy', /^tcpdump not found on PATH/],
    ['TLS offered', { tlsOffered: true }, 'proxy', /^the server offers TLS/],
    ['TLS unknown', { tlsOffered: null }, 'proxy', /^the server did not say whether it offers TLS/],
    // The first reason that applies is the one said: named windows before anything the machine lacks.
    ['named windows and no tcpdump', { windowsAcrossConnections: '--named-windows', tcpdump: null }, 'proxy', /^--named-windows/],
  ])('%s -> %s', (_name, change, capture, reason) => {
    const choice = chooseWire('auto', { ...ABLE, ...change });
    expect(choice).toEqual({ requested: 'auto', capture, reason: expect.stringMatching(reason) });
    expect(WireChoiceSchema.parse(choice)).toEqual(choice);
  });

  it('proxy and passive asked by name are taken as asked, whatever the facts', () => {
    const unable: WireFacts = {
      windowsAcrossConnections: '--named-windows',
      host: '10.0.0.5',
      privateServer: false,
      serverProcessHere: false,
      tcpdump: null,
      tlsOffered: true,
    };
    expect(chooseWire('proxy', ABLE)).toEqual({ requested: 'proxy', capture: 'proxy', reason: '--wire proxy' });
    expect(chooseWire('passive', unable)).toEqual({ requested: 'passive', capture: 'passive', reason: '--wire passive' });
  });

  it('the line said at the start names the capture and, for auto, why', () => {
    expect(describeWireChoice(chooseWire('auto', { ...ABLE, tcpdump: null }))).toBe(
      "wire: proxy (clients connect through sqltally's counting proxy, one more hop per round trip), chosen by --wire auto: tcpdump not found on PATH (apt-get install tcpdump)",
    );
    expect(describeWireChoice(chooseWire('passive', ABLE))).toMatch(/^wire: passive \(.*\): --wire passive$/);
  });
});

describe('a passive capture that cannot start: back to the proxy, naming why', () => {
  let dir = '';
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-wire-choice-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A tcpdump that says what Debian's says without CAP_NET_RAW, and exits 1. */
  function fakeTcpdump(lines: string[]): string {
    const file = path.join(dir, `tcpdump-${lines.length}-${Math.random().toString(36).slice(2)}`);
    fs.writeFileSync(file, `#!/bin/sh\ncat >&2 <<'EOF'\n${lines.join('\n')}\nEOF\nexit 1\n`, { mode: 0o755 });
    return file;
  }

  it.each([
    [
      'no CAP_NET_RAW',
      ["tcpdump: lo: You don't have permission to perform this capture on that device", '(socket: Operation not permitted)'],
      /^no CAP_NET_RAW to capture on lo \(run as root for the hop-free wire\): tcpdump exited \(code 1\): .*permission/,
    ],
    [
      'another failure',
      ['tcpdump: lo: No such device exists'],
      /^the passive capture could not start: tcpdump exited \(code 1\): tcpdump: lo: No such device exists$/,
    ],
  ])('%s', async (_name, lines, reason) => {
    const err = await startPassiveCapture({ protocol: 'postgres', target: { host: '127.0.0.1', port: 1 }, tcpdump: fakeTcpdump(lines) }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PassiveCaptureUnavailable);
    const choice = proxyAfterFailedStart((err as PassiveCaptureUnavailable).why);
    expect(choice).toEqual({ requested: 'auto', capture: 'proxy', reason: expect.stringMatching(reason) });
  });

  it('a tcpdump that is not there', async () => {
    const err = await startPassiveCapture({ protocol: 'mysql', target: { host: '127.0.0.1', port: 1 }, tcpdump: path.join(dir, 'absent') }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PassiveCaptureUnavailable);
    expect(proxyAfterFailedStart((err as PassiveCaptureUnavailable).why).reason).toMatch(
      /^the passive capture could not start: tcpdump could not be run: .*ENOENT/,
    );
  });
});
