import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { detectContainerEngine } from './engine';
import { freePort } from './local-process';

describe('detectContainerEngine', () => {
  it('says so when the socket does not exist', async () => {
    await expect(detectContainerEngine({ DOCKER_HOST: 'unix:///nonexistent/sqltally/docker.sock' })).resolves.toEqual({
      reachable: false,
      reason: 'no container engine (DOCKER_HOST socket /nonexistent/sqltally/docker.sock absent)',
    });
  });

  it('reports a closed TCP endpoint as unreachable', async () => {
    const host = `tcp://127.0.0.1:${await freePort()}`;
    const probe = await detectContainerEngine({ DOCKER_HOST: host });
    expect(probe.reachable).toBe(false);
    if (!probe.reachable) expect(probe.reason).toContain(`container engine at ${host} unreachable (connect ECONNREFUSED`);
  });

  it('finds an engine that answers /_ping', async () => {
    const server = http.createServer((req, res) => {
      res.writeHead(req.url === '/_ping' ? 200 : 404).end('OK');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const host = `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await expect(detectContainerEngine({ DOCKER_HOST: host })).resolves.toEqual({ reachable: true, endpoint: host });
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('rejects a DOCKER_HOST that is not a URL', async () => {
    await expect(detectContainerEngine({ DOCKER_HOST: 'nonsense' })).resolves.toEqual({ reachable: false, reason: 'DOCKER_HOST="nonsense" is not a URL' });
  });
});
