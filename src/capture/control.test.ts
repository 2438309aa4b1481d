import { startControlEndpoint, windowName, WindowConflict } from './control';
import type { ControlEndpoint, WindowHost } from './control';

/** A host that records what it was asked, and answers each end with the window's name and a running number. */
function fakeHost(): WindowHost & { log: string[]; hold: Promise<void> } {
  const log: string[] = [];
  let n = 0;
  return {
    log,
    hold: Promise.resolve(),
    async begin(name) {
      if (name === 'refused') throw new WindowConflict('this run measures the whole command');
      if (name === 'broken') throw new Error('the server is gone');
      log.push(`begin ${name}`);
      const self = this as unknown as { hold: Promise<void> };
      return {
        end: async () => {
          log.push(`end ${name}`);
          await self.hold;
          return { name, verdict: { kind: 'assert' }, n: ++n };
        },
      };
    },
  };
}

async function call(
  endpoint: ControlEndpoint,
  method: string,
  path: string,
  token: string | null = endpoint.token,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${endpoint.url}${path}`, { method, headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('the control endpoint', () => {
  let host: ReturnType<typeof fakeHost>;
  let endpoint: ControlEndpoint;
  beforeEach(async () => {
    host = fakeHost();
    endpoint = await startControlEndpoint(host);
  });
  afterEach(() => endpoint.close());

  it('listens on loopback only, with a random token of 64 hex characters', async () => {
    expect(endpoint.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(endpoint.token).toMatch(/^[0-9a-f]{64}$/);
    const other = await startControlEndpoint(fakeHost());
    expect(other.token).not.toBe(endpoint.token);
    await other.close();
  });

  it('begins a named window (201) and ends it with what the host answers (200)', async () => {
    expect(await call(endpoint, 'POST', '/windows/insert-100/begin')).toEqual({ status: 201, body: { name: 'insert-100', state: 'open' } });
    expect(endpoint.openWindows()).toEqual(['insert-100']);
    expect(await call(endpoint, 'POST', '/windows/insert-100/end')).toEqual({ status: 200, body: { name: 'insert-100', verdict: { kind: 'assert' }, n: 1 } });
    expect(endpoint.openWindows()).toEqual([]);
    expect(await call(endpoint, 'GET', '/windows/insert-100')).toEqual({ status: 200, body: { name: 'insert-100', verdict: { kind: 'assert' }, n: 1 } });
    expect(host.log).toEqual(['begin insert-100', 'end insert-100']);
  });

  it('refuses a request without the token, or with a wrong one, with 401 and touches nothing', async () => {
    for (const token of [null, 'x'.repeat(64), `${endpoint.token}0`]) {
      const res = await call(endpoint, 'POST', '/windows/a/begin', token);
      expect(res.status).toBe(401);
      expect(res.body['error']).toMatch(/missing or wrong token/);
    }
    const raw = await fetch(`${endpoint.url}/windows/a/begin`, { method: 'POST', headers: { authorization: endpoint.token } });
    expect(raw.status).toBe(401);
    expect(raw.headers.get('www-authenticate')).toBe('Bearer');
    expect(host.log).toEqual([]);
  });

  it('answers 404 for a window never begun, and 409 for a window ended twice', async () => {
    const unknown = await call(endpoint, 'POST', '/windows/nope/end');
    expect(unknown.status).toBe(404);
    expect(unknown.body['error']).toMatch(/no window "nope": begin it first/);
    await call(endpoint, 'POST', '/windows/a/begin');
    expect((await call(endpoint, 'POST', '/windows/a/end')).status).toBe(200);
    const twice = await call(endpoint, 'POST', '/windows/a/end');
    expect(twice).toEqual({ status: 409, body: { error: 'window "a" has already ended' } });
    expect(host.log).toEqual(['begin a', 'end a']);
  });

  it('answers 409 for a name begun again, and for a second window while one is open (windows do not nest)', async () => {
    await call(endpoint, 'POST', '/windows/a/begin');
    expect((await call(endpoint, 'POST', '/windows/a/begin')).body['error']).toBe('window "a" is already open');
    const nested = await call(endpoint, 'POST', '/windows/b/begin');
    expect(nested.status).toBe(409);
    expect(nested.body['error']).toMatch(/window "a" is still open: end it first/);
    await call(endpoint, 'POST', '/windows/a/end');
    const again = await call(endpoint, 'POST', '/windows/a/begin');
    expect(again.status).toBe(409);
    expect(again.body['error']).toMatch(/has already ended: each name is one window of the report/);
    expect((await call(endpoint, 'POST', '/windows/b/begin')).status).toBe(201);
  });

  it("answers 409 with the host's reason when it refuses, and 500 when it fails; neither leaves a window behind", async () => {
    expect(await call(endpoint, 'POST', '/windows/refused/begin')).toEqual({ status: 409, body: { error: 'this run measures the whole command' } });
    const broken = await call(endpoint, 'POST', '/windows/broken/begin');
    expect(broken.status).toBe(500);
    expect(broken.body['error']).toBe('could not begin window "broken": the server is gone');
    expect(endpoint.openWindows()).toEqual([]);
    expect((await call(endpoint, 'POST', '/windows/ok/begin')).status).toBe(201);
  });

  it('takes any name of 1 to 200 characters, percent-encoded, and refuses control characters (400)', async () => {
    const name = 'test_insert[100] ünïcode/slash';
    expect((await call(endpoint, 'POST', `/windows/${encodeURIComponent(name)}/begin`)).body).toEqual({ name, state: 'open' });
    expect((await call(endpoint, 'POST', '/windows/a%0Ab/begin')).status).toBe(400);
    expect((await call(endpoint, 'POST', `/windows/${'x'.repeat(201)}/begin`)).status).toBe(400);
    expect(windowName('%E0%A4%A')).toEqual({ ok: false, why: '"%E0%A4%A" is not valid percent-encoding' });
  });

  it('lists windows, refuses GET on begin (405) and unknown paths (404)', async () => {
    await call(endpoint, 'POST', '/windows/a/begin');
    expect(await call(endpoint, 'GET', '/windows')).toEqual({ status: 200, body: { windows: [{ name: 'a', state: 'open' }] } });
    expect((await call(endpoint, 'GET', '/windows/a/begin')).status).toBe(405);
    expect((await call(endpoint, 'POST', '/begin')).status).toBe(404);
  });

  it('waits, when closed, for a window being ended, and then answers nothing more', async () => {
    let release = (): void => undefined;
    host.hold = new Promise((r) => (release = r));
    await call(endpoint, 'POST', '/windows/a/begin');
    const ending = call(endpoint, 'POST', '/windows/a/end');
    while (!host.log.includes('end a')) await new Promise((r) => setTimeout(r, 5));
    let closed = false;
    const closing = endpoint.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(false);
    release();
    await closing;
    expect((await ending).status).toBe(200);
    await expect(fetch(`${endpoint.url}/windows`)).rejects.toThrow();
    endpoint = await startControlEndpoint(host);
  });
});
