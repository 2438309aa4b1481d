import { randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Longest window name the endpoint accepts (a key in reports and baselines). */
export const CONTROL_NAME_MAX_CHARS = 200;

/** A window begun through the endpoint; `end` closes it and gives the JSON answered to the client. */
export interface ControlledWindow {
  end(): Promise<unknown>;
}

/** Thrown by a host that cannot begin a window now for a reason the client can fix (answered 409). */
export class WindowConflict extends Error {}

/** What the endpoint drives: one capture session, one window at a time. */
export interface WindowHost {
  begin(name: string): Promise<ControlledWindow>;
}

/** The loopback endpoint, as the child's environment names it. */
export interface ControlEndpoint {
  /** `http://127.0.0.1:<port>` (SQLTALLY_CONTROL_URL). */
  readonly url: string;
  /** The bearer token every request must carry (SQLTALLY_CONTROL_TOKEN). */
  readonly token: string;
  /** Names of windows begun and not ended, in the order they were begun. */
  openWindows(): string[];
  /** Stops accepting requests and waits for those being answered; a window still open stays open (see `endOpen`). */
  close(): Promise<void>;
}

type WindowState = { state: 'beginning' } | { state: 'open'; window: ControlledWindow } | { state: 'ending' } | { state: 'ended'; result: unknown };

class HttpAnswer {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {}
}

const ROUTE = /^\/windows\/([^/]+)\/(begin|end)$/;
const ONE_WINDOW = /^\/windows\/([^/]+)$/;

function refuse(status: number, error: string): HttpAnswer {
  return new HttpAnswer(status, { error });
}

/** The window name of a path segment, or why it is not one. */
export function windowName(segment: string): { ok: true; name: string } | { ok: false; why: string } {
  let name: string;
  try {
    name = decodeURIComponent(segment);
  } catch {
    return { ok: false, why: `"${segment}" is not valid percent-encoding` };
  }
  if (name.length === 0 || name.length > CONTROL_NAME_MAX_CHARS)
    return { ok: false, why: `a window name has 1 to ${CONTROL_NAME_MAX_CHARS} characters, got ${name.length}` };
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return { ok: false, why: 'a window name has no control characters' };
  return { ok: true, name };
}

function authorised(header: string | undefined, token: Buffer): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) return false;
  const given = Buffer.from(match[1]!, 'utf8');
  return given.length === token.length && timingSafeEqual(given, token);
}

/**
 * Starts the control endpoint on 127.0.0.1 at a random port, with a random token. Windows are named; each name is
 * begun and ended once (it is one entry of the report), and one window is open at a time (windows would count each
 * other). Answers JSON: `POST /windows/<name>/begin` 201, `POST /windows/<name>/end` 200 with what the host's
 * window gives; `GET /windows/<name>` the state or that result; `GET /windows` all of them. Without the token 401,
 * an unknown window 404, a window begun or ended twice, or a second window while one is open, 409.
 */
export async function startControlEndpoint(host: WindowHost): Promise<ControlEndpoint> {
  const token = randomBytes(32).toString('hex');
  const tokenBytes = Buffer.from(token, 'utf8');
  const windows = new Map<string, WindowState>();

  const openName = (): string | undefined => [...windows].find(([, w]) => w.state === 'open' || w.state === 'beginning' || w.state === 'ending')?.[0];

  async function begin(name: string): Promise<HttpAnswer> {
    const known = windows.get(name);
    if (known)
      return refuse(
        409,
        known.state === 'ended'
          ? `window "${name}" has already ended: each name is one window of the report; begin another name`
          : `window "${name}" is already open`,
      );
    const other = openName();
    if (other !== undefined) return refuse(409, `window "${other}" is still open: end it first (windows do not nest; they would count each other)`);
    windows.set(name, { state: 'beginning' });
    try {
      const window = await host.begin(name);
      windows.set(name, { state: 'open', window });
      return new HttpAnswer(201, { name, state: 'open' });
    } catch (err) {
      windows.delete(name);
      if (err instanceof WindowConflict) return refuse(409, err.message);
      return refuse(500, `could not begin window "${name}": ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  async function end(name: string): Promise<HttpAnswer> {
    const known = windows.get(name);
    if (!known) return refuse(404, `no window "${name}": begin it first (POST /windows/${encodeURIComponent(name)}/begin)`);
    if (known.state === 'ended' || known.state === 'ending') return refuse(409, `window "${name}" has already ended`);
    if (known.state === 'beginning') return refuse(409, `window "${name}" is still beginning`);
    windows.set(name, { state: 'ending' });
    try {
      const result = await known.window.end();
      windows.set(name, { state: 'ended', result });
      return new HttpAnswer(200, result as Record<string, unknown>);
    } catch (err) {
      const result = { name, error: `could not end window "${name}": ${err instanceof Error ? err.message : String(err)}` };
      windows.set(name, { state: 'ended', result });
      return new HttpAnswer(500, result);
    }
  }

  function show(name: string): HttpAnswer {
    const known = windows.get(name);
    if (!known) return refuse(404, `no window "${name}"`);
    return new HttpAnswer(200, known.state === 'ended' ? (known.result as Record<string, unknown>) : { name, state: known.state });
  }

  async function answer(req: http.IncomingMessage): Promise<HttpAnswer> {
    if (!authorised(req.headers.authorization, tokenBytes)) return refuse(401, 'missing or wrong token: send "Authorization: Bearer $SQLTALLY_CONTROL_TOKEN"');
    const path = (req.url ?? '/').split('?')[0]!;
    const route = ROUTE.exec(path);
    if (route) {
      if (req.method !== 'POST') return refuse(405, `${req.method} ${path}: use POST`);
      const name = windowName(route[1]!);
      if (!name.ok) return refuse(400, name.why);
      return route[2] === 'begin' ? begin(name.name) : end(name.name);
    }
    const one = ONE_WINDOW.exec(path);
    if (one && req.method === 'GET') {
      const name = windowName(one[1]!);
      return name.ok ? show(name.name) : refuse(400, name.why);
    }
    if ((path === '/windows' || path === '/') && req.method === 'GET') {
      return new HttpAnswer(200, { windows: [...windows].map(([name, w]) => ({ name, state: w.state })) });
    }
    return refuse(404, `${req.method} ${path}: no such endpoint (POST /windows/<name>/begin, POST /windows/<name>/end, GET /windows)`);
  }

  const pending = new Set<Promise<void>>();
  const server = http.createServer((req, res) => {
    // The body is never read; a client sending one gets its answer all the same.
    req.resume();
    const handled = answer(req).then(
      (a) => {
        res.writeHead(a.status, { 'content-type': 'application/json', ...(a.status === 401 ? { 'www-authenticate': 'Bearer' } : {}) });
        res.end(`${JSON.stringify(a.body)}\n`);
      },
      (err: unknown) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}\n`);
      },
    );
    pending.add(handled);
    void handled.finally(() => pending.delete(handled));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    token,
    openWindows: () => [...windows].filter(([, w]) => w.state === 'open').map(([name]) => name),
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await Promise.allSettled([...pending]);
      server.closeAllConnections();
      await closed;
    },
  };
}
