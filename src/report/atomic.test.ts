import { promises as fsp, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqltallyError } from '../shared/errors';
import { checkOutputDir, writeFileAtomic, writeOutputDir } from './atomic';

const FILES = [
  { name: 'report.md', content: '# md\n' },
  { name: 'bench.json', content: '[]\n' },
  { name: 'report.json', content: '{}\n' },
];

describe('atomic writes', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqltally-atomic-'));
  });
  afterEach(() => {
    jest.restoreAllMocks();
    rmSync(dir, { recursive: true, force: true });
  });

  it('replaces a file and leaves no temp file behind', async () => {
    const target = join(dir, 'baseline.json');
    writeFileSync(target, 'old');
    await writeFileAtomic(target, 'new');
    expect(readFileSync(target, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['baseline.json']);
  });

  it('leaves the old file intact when the write fails half way', async () => {
    const target = join(dir, 'baseline.json');
    writeFileSync(target, 'old content');
    jest.spyOn(fsp, 'rename').mockRejectedValueOnce(Object.assign(new Error('disk on fire'), { code: 'EIO' }));
    const err = await writeFileAtomic(target, 'new content').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).phase).toBe('report');
    expect((err as Error).message).toContain(`cannot write ${target}: disk on fire`);
    expect(readFileSync(target, 'utf8')).toBe('old content');
    expect(readdirSync(dir)).toEqual(['baseline.json']);
  });

  it('fills a new output directory in one step', async () => {
    const out = join(dir, 'a', 'b', 'run');
    await writeOutputDir(out, FILES);
    expect(readdirSync(out).sort()).toEqual(['bench.json', 'report.json', 'report.md']);
    expect(readdirSync(join(dir, 'a', 'b'))).toEqual(['run']);
  });

  it('leaves no directory at all when writing a new one fails', async () => {
    const out = join(dir, 'run');
    jest.spyOn(fsp, 'rename').mockRejectedValueOnce(Object.assign(new Error('no'), { code: 'EIO' }));
    await expect(writeOutputDir(out, FILES)).rejects.toThrow(SqltallyError);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses an existing non-empty directory without force, and touches nothing', async () => {
    const out = join(dir, 'run');
    mkdirSync(out);
    writeFileSync(join(out, 'report.json'), 'previous run');
    const err = await writeOutputDir(out, FILES).catch((e: unknown) => e);
    expect((err as Error).message).toContain(`output directory ${out} already exists and is not empty`);
    expect((err as Error).message).toContain('--force');
    await expect(checkOutputDir(out)).rejects.toThrow(/already exists and is not empty \(report\.json\)/);
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toBe('previous run');
  });

  it('with force replaces only its own files', async () => {
    const out = join(dir, 'run');
    mkdirSync(out);
    writeFileSync(join(out, 'report.json'), 'previous run');
    writeFileSync(join(out, 'notes.txt'), 'mine');
    await checkOutputDir(out, { force: true });
    await writeOutputDir(out, FILES, { force: true });
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toBe('{}\n');
    expect(readFileSync(join(out, 'notes.txt'), 'utf8')).toBe('mine');
  });

  it('with force leaves every old file as it was when writing the last new one fails', async () => {
    const out = join(dir, 'run');
    mkdirSync(out);
    for (const f of FILES) writeFileSync(join(out, f.name), `old ${f.name}`);
    const open = fsp.open.bind(fsp);
    // The third temp file (report.json's) cannot be created: the disk filled up after the first two.
    let opened = 0;
    jest.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
      if (String(args[0]).includes('.report.json.') && ++opened === 1) throw Object.assign(new Error('no space'), { code: 'ENOSPC' });
      return open(...args);
    });
    const err = await writeOutputDir(out, FILES, { force: true }).catch((e: unknown) => e);
    expect((err as Error).message).toContain('no space left on device');
    for (const f of FILES) expect(readFileSync(join(out, f.name), 'utf8')).toBe(`old ${f.name}`);
    expect(readdirSync(out).sort()).toEqual(['bench.json', 'report.json', 'report.md']);
  });

  it('writes into an existing empty directory', async () => {
    await checkOutputDir(dir);
    await writeOutputDir(dir, FILES);
    expect(readdirSync(dir).sort()).toEqual(['bench.json', 'report.json', 'report.md']);
  });

  it('gives a clear report-phase error for an unwritable place', async () => {
    // Running as root defeats chmod, so use a path whose parent is a file: no user can write there.
    writeFileSync(join(dir, 'plain-file'), '');
    const out = join(dir, 'plain-file', 'run');
    const err = await checkOutputDir(out).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).phase).toBe('report');
    expect((err as Error).message).toContain(`cannot use output directory ${out}: a part of the path is a file, not a directory`);
    await expect(writeOutputDir(out, FILES)).rejects.toThrow(/output directory .*: a part of the path is a file/);
    await expect(checkOutputDir(join(dir, 'plain-file'))).rejects.toThrow(/exists and is not a directory/);
  });

  it('refuses file names that would escape the directory', async () => {
    await expect(writeOutputDir(join(dir, 'run'), [{ name: '../x', content: '' }])).rejects.toThrow(/bad output file name/);
  });
});
