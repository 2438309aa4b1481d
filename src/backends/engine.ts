import fs from 'node:fs';
import http from 'node:http';

/** A container engine answer must come fast: this check runs on every `sqltally backends` and test run. */
const PING_TIMEOUT_MS = 1_500;
const DEFAULT_SOCKET = '/var/run/docker.sock';

export type EngineProbe = { reachable: true; endpoint: string } | { reachable: false; reason: string };

const cache = new Map<string, Promise<EngineProbe>>();

function ping(options: http.RequestOptions, endpoint: string): Promise<EngineProbe> {
  return new Promise((resolve) => {
    const request = http.get({ ...options, path: '/_ping', timeout: PING_TIMEOUT_MS }, (response) => {
      response.resume();
      resolve(
        response.statusCode === 200
          ? { reachable: true, endpoint }
          : { reachable: false, reason: `container engine at ${endpoint} answered /_ping with HTTP ${response.statusCode}` },
      );
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${PING_TIMEOUT_MS} ms`)));
    request.on('error', (err) => resolve({ reachable: false, reason: `container engine at ${endpoint} unreachable (${err.message})` }));
  });
}

/**
 * Whether a Docker-compatible engine answers, without loading Testcontainers (which can wait a long time on a
 * missing engine). Looks at DOCKER_HOST, else the default socket.
 */
export function detectContainerEngine(env: NodeJS.ProcessEnv = process.env): Promise<EngineProbe> {
  const host = env['DOCKER_HOST'];
  const key = host ?? DEFAULT_SOCKET;
  let probe = cache.get(key);
  if (!probe) {
    probe = probeEngine(host);
    cache.set(key, probe);
  }
  return probe;
}

async function probeEngine(host: string | undefined): Promise<EngineProbe> {
  if (!host) {
    if (!fs.existsSync(DEFAULT_SOCKET)) return { reachable: false, reason: `no container engine (DOCKER_HOST unset, ${DEFAULT_SOCKET} absent)` };
    return ping({ socketPath: DEFAULT_SOCKET }, DEFAULT_SOCKET);
  }
  let url: URL;
  try {
    url = new URL(host);
  } catch {
    return { reachable: false, reason: `DOCKER_HOST="${host}" is not a URL` };
  }
  if (url.protocol === 'unix:') {
    if (!fs.existsSync(url.pathname)) return { reachable: false, reason: `no container engine (DOCKER_HOST socket ${url.pathname} absent)` };
    return ping({ socketPath: url.pathname }, host);
  }
  if (url.protocol === 'tcp:' || url.protocol === 'http:') {
    return ping({ host: url.hostname, port: Number(url.port) || 2375 }, host);
  }
  return { reachable: false, reason: `DOCKER_HOST scheme ${url.protocol} is not supported by this check (unix:// or tcp://)` };
}
