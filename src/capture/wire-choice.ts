import { z } from 'zod';
import { loopbackAddress } from '../wire/passive';

/** How the wire layer is read (see `CaptureOptions.wireCapture`). */
export type WireCapture = 'proxy' | 'passive';
export const WIRE_CAPTURES: readonly WireCapture[] = ['proxy', 'passive'];

/** What `--wire` asks for: `auto` takes the passive capture where it gives the proxy's counts, the proxy elsewhere. */
export const WIRE_REQUESTS = ['auto', 'proxy', 'passive'] as const;
export type WireRequest = (typeof WIRE_REQUESTS)[number];

/** What was asked for, what read the wire layer (`none`: SQLite has no wire), and why. */
export const WireChoiceSchema = z.object({
  requested: z.enum(WIRE_REQUESTS),
  capture: z.enum(['proxy', 'passive', 'none']),
  reason: z.string().min(1),
});
export type WireChoice = z.infer<typeof WireChoiceSchema>;

/** What the automatic choice looks at, all known before anything is captured. */
export interface WireFacts {
  /** Why clients may keep connections open across window edges (`--named-windows`, `sqltally proxy`), or null. */
  windowsAcrossConnections: string | null;
  /** The server's host as its clients reach it. */
  host: string;
  /** sqltally started the server: nobody else's connections reach its port. */
  privateServer: boolean;
  /**
   * The server is a process on this machine (not a container): its clients' traffic crosses `lo`. A container
   * engine may route a published loopback port around `lo` (DNAT without its userland proxy).
   */
  serverProcessHere: boolean;
  /** tcpdump's path, or null when it is not on PATH. */
  tcpdump: string | null;
  /** The server offers TLS to a client that asks; null when it did not say. */
  tlsOffered: boolean | null;
}

/**
 * The passive capture where it counts what the proxy would, and the proxy where it may not: connections open at a
 * window's edge (it cannot settle them), another process's connections on a shared server (it counts every socket
 * but its own), a server off loopback or in a container, no tcpdump, or TLS on offer (clients take it up by default, and an encrypted
 * session cannot be read). Whether tcpdump may capture is known only by starting it: see {@link proxyAfterFailedStart}.
 */
export function chooseWire(requested: WireRequest, facts: WireFacts): WireChoice {
  if (requested !== 'auto') return { requested, capture: requested, reason: `--wire ${requested}` };
  const proxy = (reason: string): WireChoice => ({ requested, capture: 'proxy', reason });
  if (facts.windowsAcrossConnections)
    return proxy(`${facts.windowsAcrossConnections}: a connection open at a window's edge can be settled only through the proxy`);
  if (loopbackAddress(facts.host) === null) return proxy(`the server is at ${facts.host}, not on a loopback IPv4 address`);
  if (!facts.privateServer) return proxy("sqltally did not start the server: a capture of its port would count other clients' connections too");
  if (!facts.serverProcessHere) return proxy('the server runs in a container, whose published port may not carry its traffic over lo');
  if (!facts.tcpdump) return proxy('tcpdump not found on PATH (apt-get install tcpdump)');
  if (facts.tlsOffered === null) return proxy('the server did not say whether it offers TLS, which a capture could not read');
  if (facts.tlsOffered) return proxy('the server offers TLS, which its clients take up by default and a capture cannot read');
  return { requested, capture: 'passive', reason: 'a private server on loopback offering no TLS, and tcpdump to copy its traffic' };
}

/** Back to the proxy when tcpdump could not start capturing: `why` is what the capture said. */
export function proxyAfterFailedStart(why: string): WireChoice {
  const denied = /permission|not permitted/i.test(why);
  return {
    requested: 'auto',
    capture: 'proxy',
    reason: denied ? `no CAP_NET_RAW to capture on lo (run as root for the hop-free wire): ${why}` : `the passive capture could not start: ${why}`,
  };
}

/** The line said at the start: what reads the wire layer and, when the choice was automatic, why. */
export function describeWireChoice(choice: WireChoice): string {
  if (choice.capture === 'none') return `wire: none (${choice.reason})`;
  const what =
    choice.capture === 'passive'
      ? "passive (a tcpdump copy of the server's loopback traffic; clients connect to the server itself)"
      : "proxy (clients connect through sqltally's counting proxy, one more hop per round trip)";
  return choice.requested === 'auto' ? `wire: ${what}, chosen by --wire auto: ${choice.reason}` : `wire: ${what}: --wire ${choice.requested}`;
}
