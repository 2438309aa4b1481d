import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { leadingVersion } from './backend';
import { SqltallyError } from '../shared/errors';
import { everyThreadStopped, liveResources, processAlive, processStopped } from './live';
import { readOwnerRecord, ownerFileFor } from './ownership';
import { NoSqlDriver } from './sql-client';
import {
  DATADIR_PREFIX,
  freePort,
  launchServer,
  lookupUser,
  makePrivateDir,
  reachableBy,
  runTag,
  runTool,
  SHARED_SERVER_BASE,
  tempBase,
} from './local-process';

describe('makePrivateDir', () => {
  let base: string;
  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-unit-base-'));
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  it('makes a mode-0700 directory named for the run and backend, tracked until removed', async () => {
    const env = { TMPDIR: base, SQLTALLY_RUN_ID: 'run-42' };
    const dir = makePrivateDir('postgres', env);
    expect(path.dirname(dir.path)).toBe(base);
    expect(path.basename(dir.path).startsWith(`${DATADIR_PREFIX}run42-postgres-`)).toBe(true);
    expect(fs.statSync(dir.path).mode & 0o777).toBe(0o700);
    expect(liveResources()).toContain(dir.resource);
    await dir.remove();
    await dir.remove();
    expect(fs.existsSync(dir.path)).toBe(false);
    expect(liveResources()).not.toContain(dir.resource);
  });

  it('fails with a provision-phase error and a hint when TMPDIR cannot hold directories', () => {
    const file = path.join(base, 'file');
    fs.writeFileSync(file, '');
    let err: unknown;
    try {
      makePrivateDir('mariadb', { TMPDIR: file });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).message).toContain(`[backend mariadb, provider local, phase provision] cannot create a private data directory under ${file}`);
    expect((err as SqltallyError).hint).toBe('set TMPDIR to a writable directory with free space');
  });
});

describe('a private directory for a server that runs as another OS user', () => {
  let base: string;
  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-unit-reach-'));
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));
  const other = { user: 'someone', uid: 65534, gid: 65534 };

  it('is reachable only through folders whose execute bit applies to that user', () => {
    // mkdtemp makes 0700, as `mktemp -d` and CI runners' TMPDIRs are.
    expect(fs.statSync(base).mode & 0o777).toBe(0o700);
    expect(reachableBy(base, { ...other, uid: fs.statSync(base).uid })).toBe(true);
    expect(reachableBy(base, other)).toBe(false);
    fs.chmodSync(base, 0o711);
    expect(reachableBy(base, other)).toBe(os.tmpdir() === '/tmp' || reachableBy(os.tmpdir(), other));
  });

  it('a relative TMPDIR is taken from the working directory, made absolute', () => {
    expect(tempBase({ TMPDIR: 'some/where' })).toBe(path.resolve('some/where'));
  });

  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0 && lookupUser('postgres') ? it : it.skip;
  asRoot('(root, postgres user) is made under the shared server base when TMPDIR is 0700, reachable by that user and owned by it', async () => {
    const postgres = lookupUser('postgres')!;
    const dir = makePrivateDir('postgres', { TMPDIR: base, SQLTALLY_RUN_ID: 'reach' }, postgres);
    try {
      expect(path.dirname(dir.path)).toBe(SHARED_SERVER_BASE);
      expect(fs.statSync(SHARED_SERVER_BASE)).toMatchObject({ uid: 0 });
      expect(fs.statSync(SHARED_SERVER_BASE).mode & 0o777).toBe(0o711);
      expect(reachableBy(dir.path, postgres)).toBe(true);
      expect(fs.statSync(dir.path)).toMatchObject({ uid: postgres.uid });
      // The record says so, or the next sweep would refuse a directory that is not root's.
      expect(readOwnerRecord(ownerFileFor(dir.path))?.dirUid).toBe(postgres.uid);
    } finally {
      await dir.remove();
    }
  });

  asRoot('(root, postgres user) is not moved when TMPDIR is no directory at all: that fails with its own message', () => {
    const file = path.join(base, 'file');
    fs.writeFileSync(file, '');
    expect(() => makePrivateDir('postgres', { TMPDIR: file }, lookupUser('postgres')!)).toThrow(`cannot create a private data directory under ${file}`);
  });
});

describe('runTag', () => {
  it('keeps only letters and digits, and defaults to cli', () => {
    expect(runTag({ SQLTALLY_RUN_ID: 'j-1/2' })).toBe('j12');
    expect(runTag({})).toBe('cli');
  });
});

describe('freePort', () => {
  it('returns a loopback port that can be bound right away', async () => {
    const port = await freePort();
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    await new Promise<void>((r) => server.close(() => r()));
    expect(port).toBeGreaterThan(0);
  });
});

describe('runTool', () => {
  it('returns the output of a tool that succeeds and forgets its process', async () => {
    await expect(runTool('sqlite', '/bin/sh', ['-c', 'echo made'], { cwd: os.tmpdir(), env: process.env })).resolves.toContain('made');
    expect(liveResources().filter((r) => r.pid !== undefined)).toEqual([]);
  });

  it('shows the error lines of a tool that fails, not just its tail', async () => {
    const script = 'echo "[ERROR] the cause"; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do echo noise $i; done; exit 7';
    const err = await runTool('mariadb', '/bin/sh', ['-c', script], { cwd: os.tmpdir(), env: process.env }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).message).toContain('sh failed (7)');
    expect((err as SqltallyError).message).toContain('[ERROR] the cause');
    expect((err as SqltallyError).message).toContain('noise 14');
  });
});

describe('lookupUser and leadingVersion', () => {
  it('reads root from /etc/passwd and knows no made-up user', () => {
    expect(lookupUser('root')).toEqual({ user: 'root', uid: 0, gid: 0 });
    expect(lookupUser('no-such-user-sqltally')).toBeUndefined();
  });

  it('cuts versions to the parts a variant id names', () => {
    expect(leadingVersion('10.11.19-MariaDB-0+deb12u1', 2)).toBe('10.11');
    expect(leadingVersion('15.20 (Debian 15.20-0+deb12u1)', 1)).toBe('15');
    expect(leadingVersion('3.51.2', 2)).toBe('3.51');
  });
});

describe('processStopped', () => {
  it('tells a stopped process (which cannot act on a polite shutdown) from a running one and from none', async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const pid = child.pid as number;
    const gone = new Promise((resolve) => child.once('exit', resolve));
    try {
      expect(processStopped(pid)).toBe(false);
      process.kill(pid, 'SIGSTOP');
      // The kernel marks it stopped as the signal is delivered; give it a moment on a busy machine.
      for (let i = 0; i < 100 && !processStopped(pid); i++) await new Promise((r) => setTimeout(r, 10));
      expect(processStopped(pid)).toBe(true);
      expect(processAlive(pid)).toBe(true);
    } finally {
      process.kill(pid, 'SIGKILL');
      await gone;
    }
    expect(processStopped(pid)).toBe(false);
    expect(processAlive(pid)).toBe(false);
  });
});

describe('everyThreadStopped', () => {
  it('reads every thread of a multi-threaded process, and counts a process that is gone as stopped', async () => {
    const { spawn } = await import('node:child_process');
    // Node runs V8's and libuv's threads beside the main one.
    const child = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 1000)'], { stdio: 'ignore' });
    const pid = child.pid as number;
    const gone = new Promise((resolve) => child.once('exit', resolve));
    try {
      for (let i = 0; i < 200 && fs.readdirSync(`/proc/${pid}/task`).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(fs.readdirSync(`/proc/${pid}/task`).length).toBeGreaterThan(1);
      expect(everyThreadStopped(pid)).toBe(false);
      process.kill(pid, 'SIGSTOP');
      for (let i = 0; i < 100 && !everyThreadStopped(pid); i++) await new Promise((r) => setTimeout(r, 10));
      expect(everyThreadStopped(pid)).toBe(true);
    } finally {
      process.kill(pid, 'SIGKILL');
      await gone;
    }
    expect(everyThreadStopped(pid)).toBe(true);
  });
});

describe('launchServer stop', () => {
  it("waits for the server's children that outlive it (in sessions of their own, as PostgreSQL's logger), then removes its directory", async () => {
    const dir = makePrivateDir('fake', { ...process.env, SQLTALLY_RUN_ID: `lp${process.pid}` });
    const childPidFile = path.join(dir.path, 'child.pid');
    // A "server" that starts a child in a session of its own (no group signal reaches it), which lingers 300 ms
    // after its parent was told to stop, as PostgreSQL's logger drains its pipe after the postmaster has gone.
    const script = `setsid sh -c 'trap "" TERM; echo $$ > ${childPidFile}; while [ -e ${childPidFile} ]; do sleep 0.05; done; sleep 0.3' & trap 'exit 0' TERM; while :; do sleep 0.05; done`;
    const running = await launchServer({
      id: 'fake',
      binary: '/bin/sh',
      args: () => ['-c', script],
      dir,
      stopSignal: 'SIGTERM',
      bindFailure: /never/,
      ping: async () => {
        if (!fs.existsSync(childPidFile)) throw new Error('not yet');
      },
      env: process.env,
    });
    const childPid = Number(fs.readFileSync(childPidFile, 'utf8'));
    expect(processAlive(childPid)).toBe(true);
    // The parent's stop lets the child go on: it stops looping once its file is gone, and lives 300 ms more.
    fs.rmSync(childPidFile);
    await running.stop();
    expect(processAlive(childPid)).toBe(false);
    expect(fs.existsSync(dir.path)).toBe(false);
  });
});

describe('launchServer bind race', () => {
  it('tries another port when the bind failure reaches the log only after the server exited (a logging collector)', async () => {
    const dir = makePrivateDir('fake', { ...process.env, SQLTALLY_RUN_ID: `lb${process.pid}` });
    const logFile = path.join(dir.path, 'server.log');
    const ready = path.join(dir.path, 'ready');
    const ports: number[] = [];
    const takenPort = await freePort();
    // On the first port the "server" exits at once with code 1, and a process of its own writes the bind failure to
    // the log file 300 ms later, as PostgreSQL's logging collector does; on the next port it comes up.
    const script = (port: number): string =>
      port === takenPort
        ? `setsid sh -c 'sleep 0.3; echo "FATAL:  could not create any TCP/IP sockets" >> ${logFile}' & exit 1`
        : `touch ${ready}; trap 'exit 0' TERM; while :; do sleep 0.05; done`;
    let current = 0;
    try {
      const running = await launchServer({
        id: 'fake',
        binary: '/bin/sh',
        args: (port: number) => {
          current = port;
          return ['-c', script(port)];
        },
        dir,
        stopSignal: 'SIGTERM',
        bindFailure: /could not create any TCP\/IP sockets/,
        ping: async () => {
          if (!fs.existsSync(ready)) throw new Error('not yet');
        },
        pickPort: async () => {
          const port = ports.length === 0 ? takenPort : await freePort();
          ports.push(port);
          return port;
        },
        logFile,
        env: process.env,
      });
      expect(ports).toHaveLength(2);
      expect(running.port).toBe(ports[1]);
      expect(current).toBe(ports[1]);
      await running.stop();
    } finally {
      await dir.remove();
    }
  });
});

describe('launchServer without a driver for its own SQL', () => {
  it('fails at once with the install hint, not after the ready timeout, and stops the server', async () => {
    const dir = makePrivateDir('fake', { ...process.env, SQLTALLY_RUN_ID: `nd${process.pid}` });
    const missing = new NoSqlDriver('no PostgreSQL driver is installed (tried pg, postgres)', { backend: 'fake', phase: 'connect', hint: 'npm install pg' });
    let pid = 0;
    const started = Date.now();
    const launched = launchServer({
      id: 'fake',
      binary: '/bin/sh',
      args: () => ['-c', `echo $$ > ${path.join(dir.path, 'pid')}; trap 'exit 0' TERM; while :; do sleep 0.05; done`],
      dir,
      stopSignal: 'SIGTERM',
      bindFailure: /never/,
      ping: async () => {
        pid = Number(fs.readFileSync(path.join(dir.path, 'pid'), 'utf8'));
        throw missing;
      },
      readyTimeoutMs: 60_000,
      env: process.env,
    });
    await expect(launched).rejects.toThrow(
      /^\[backend fake, provider local, phase start\] no PostgreSQL driver is installed \(tried pg, postgres\)\n {2}what to do: npm install pg$/,
    );
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(pid).toBeGreaterThan(0);
    expect(processAlive(pid)).toBe(false);
    expect(fs.existsSync(dir.path)).toBe(false);
  });
});
