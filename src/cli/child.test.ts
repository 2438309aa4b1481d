import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exitCodeOf, resolveCommand, startChild } from './child';

describe('resolveCommand', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sqltally-child-'));
    writeFileSync(path.join(dir, 'plain'), 'not executable');
    writeFileSync(path.join(dir, 'tool'), '#!/bin/sh\n');
    chmodSync(path.join(dir, 'tool'), 0o755);
    mkdirSync(path.join(dir, 'folder'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('finds a name on PATH and a path as it is', () => {
    expect(resolveCommand('tool', { PATH: `/nonexistent:${dir}` })).toEqual({ ok: true, file: path.join(dir, 'tool') });
    expect(resolveCommand('./tool', {}, dir)).toEqual({ ok: true, file: path.join(dir, 'tool') });
  });

  it('says 127 for a command that does not exist, 126 for one that cannot be executed', () => {
    expect(resolveCommand('no-such-command-sqltally', { PATH: dir })).toEqual({
      ok: false,
      exitCode: 127,
      message: 'no-such-command-sqltally: command not found on PATH',
    });
    expect(resolveCommand('./missing', {}, dir)).toEqual({ ok: false, exitCode: 127, message: './missing: no such file' });
    expect(resolveCommand('plain', { PATH: dir })).toMatchObject({ ok: false, exitCode: 126 });
    expect(resolveCommand(path.join(dir, 'folder'), {})).toMatchObject({ ok: false, exitCode: 126 });
    expect(resolveCommand('', {})).toMatchObject({ ok: false, exitCode: 127 });
  });
});

describe('startChild', () => {
  const sh = resolveCommand('sh', process.env);
  if (!sh.ok) throw new Error('no sh');

  it('passes the exit code through, and a signal as 128 + its number', async () => {
    const child = await startChild(sh.file, 'sh', ['-c', 'exit 7'], { env: process.env, stdio: 'ignore' });
    const exit = await child.exited;
    expect(exit).toEqual({ code: 7, signal: null });
    expect(exitCodeOf(exit)).toBe(7);
    expect(exitCodeOf({ code: null, signal: 'SIGKILL' })).toBe(137);
  });

  it('stops every process of its group, one that ignores SIGTERM included, and leaves nothing running', async () => {
    // A grandchild that ignores SIGTERM, and the shell waiting for it.
    const child = await startChild(sh.file, 'sh', ['-c', 'trap "" TERM; sleep 60 & sleep 60 & wait'], { env: process.env, stdio: 'ignore' });
    for (let i = 0; i < 200 && child.members().length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(child.members().length).toBe(3);
    expect(child.members()).toContain(child.pid);
    const stopped = await child.stop(200);
    expect(stopped).toBe(3);
    expect(child.members()).toEqual([]);
    expect((await child.exited).signal).toBe('SIGKILL');
    expect(await child.stop(200)).toBe(0);
  });

  it('runs the command in a process group of its own, apart from sqltally', async () => {
    const child = await startChild(sh.file, 'sh', ['-c', 'sleep 60'], { env: process.env, stdio: 'ignore' });
    expect(child.members()).toContain(child.pid);
    expect(child.members()).not.toContain(process.pid);
    await child.stop(1000);
    expect((await child.exited).signal).toBe('SIGTERM');
  });
});
