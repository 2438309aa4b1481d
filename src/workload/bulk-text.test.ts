import { Readable } from 'node:stream';
import { bulkChunks, bulkTextBytes, bulkTextField, bulkTextLine, bulkTextStream, parseBulkTextLine } from './bulk-text';
import { makeRows } from './rows';

async function collect(stream: Readable): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of stream) out.push(chunk as Buffer);
  return out;
}

describe('bulk text format (COPY text, LOAD DATA defaults)', () => {
  it('escapes backslash, tab, newline and carriage return, and writes NULL as \\N', () => {
    expect(bulkTextField('a\tb')).toBe('a\\tb');
    expect(bulkTextField('line\nnext\r')).toBe('line\\nnext\\r');
    expect(bulkTextField('back\\slash')).toBe('back\\\\slash');
    expect(bulkTextField('\\N')).toBe('\\\\N');
    expect(bulkTextField(null)).toBe('\\N');
    expect(bulkTextField(-(2n ** 63n))).toBe('-9223372036854775808');
    expect(bulkTextField(1.5e-300)).toBe('1.5e-300');
    expect(() => bulkTextField({})).toThrow(/strings, numbers, bigints and NULL/);
  });

  it('reads back equal: every field that needs escaping, NULL, the empty string and the text "\\N"', () => {
    const values = ['tab\there', 'new\nline', 'cr\rhere', 'back\\slash\\', '\\N', '', null, "O'Brien", 'café ✓ 🚀', '\\t literal'];
    const line = bulkTextLine(values);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toMatch(/\n/);
    expect(line.split('\t')).toHaveLength(values.length);
    expect(parseBulkTextLine(line)).toEqual(values);
  });

  it('round-trips every generated row (the workload has tabs, backslashes, quotes, emoji)', () => {
    for (const row of makeRows(2000)) {
      const back = parseBulkTextLine(bulkTextLine(row));
      expect(back).toEqual(row.map((v) => String(v)));
    }
  });

  it('streams the rows in chunks of the given size, encoded as they are read, the bytes the plan counts', async () => {
    const rows = makeRows(2500);
    const chunks = await collect(bulkTextStream(rows, 0, rows.length, 1000));
    expect(chunks).toHaveLength(bulkChunks(2500, 1000));
    expect(chunks.map((c) => c.toString('utf8').split('\n').length - 1)).toEqual([1000, 1000, 500]);
    expect(Buffer.concat(chunks).length).toBe(bulkTextBytes(rows));
    expect(Buffer.concat(chunks).toString('utf8')).toBe(rows.map((r) => bulkTextLine(r)).join(''));
  });

  it('a stream of no rows ends at once; a bad chunk size is refused', async () => {
    expect(await collect(bulkTextStream([]))).toEqual([]);
    expect(bulkChunks(0)).toBe(0);
    expect(() => bulkTextStream([], 0, 0, 0)).toThrow(/rows per bulk chunk must be a positive integer, got 0/);
  });

  it('never holds more than a chunk or two ahead of its reader', async () => {
    const rows = makeRows(10_000);
    const stream = bulkTextStream(rows, 0, rows.length, 100);
    await new Promise((resolve) => setImmediate(resolve));
    expect(stream.readableLength).toBeLessThanOrEqual(2);
    stream.destroy();
  });
});
