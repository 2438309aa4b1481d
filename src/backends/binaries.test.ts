import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { versionOutput } from './binaries';

// A fake binary that counts its runs in a file beside it.
function fakeBinary(dir: string, name: string, body: string): { bin: string; runs: () => number } {
  const bin = path.join(dir, name);
  const log = path.join(dir, `${name}.runs`);
  fs.writeFileSync(bin, `#!/bin/sh\necho run >> '${log}'\n${body}\n`, { mode: 0o755 });
  return { bin, runs: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0) };
}

describe('versionOutput', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'binaries-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('asks a binary once per process for the same arguments, and again for other arguments', async () => {
    const { bin, runs } = fakeBinary(dir, 'server', 'echo "server Ver 1.2.3 $1"');
    expect(await versionOutput(bin)).toBe('server Ver 1.2.3 --version');
    expect(await versionOutput(bin)).toBe('server Ver 1.2.3 --version');
    expect(runs()).toBe(1);
    expect(await versionOutput(bin, ['--bindir'])).toBe('server Ver 1.2.3 --bindir');
    expect(runs()).toBe(2);
  });

  it('asks again once the binary was replaced', async () => {
    const first = fakeBinary(dir, 'server', 'echo "server Ver 1.0"');
    expect(await versionOutput(first.bin)).toBe('server Ver 1.0');
    // Replaced by an upgrade: another file under the same name.
    fs.rmSync(first.bin);
    const second = fakeBinary(dir, 'server', 'echo "server Ver 2.0.0"');
    expect(await versionOutput(second.bin)).toBe('server Ver 2.0.0');
    // Both log to the same file (by name): one run each, the second not served from what the first answered.
    expect(second.runs()).toBe(2);
  });

  it('does not keep a binary that would not run: it is asked again', async () => {
    const { bin, runs } = fakeBinary(dir, 'broken', 'exit 3');
    expect(await versionOutput(bin)).toBeUndefined();
    expect(await versionOutput(bin)).toBeUndefined();
    expect(runs()).toBe(2);
  });
});
