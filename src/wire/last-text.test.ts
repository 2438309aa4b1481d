import { LastText, Match } from './last-text';

const bytes = (text: string): Buffer => Buffer.from(`xx${text}yy`);
const match = (last: LastText<string>, text: string): Match => last.match(bytes(text), 2, 2 + Buffer.byteLength(text));
const keep = (last: LastText<string>, text: string, plain: readonly [number, number] | null = null): void =>
  last.keep(bytes(text), 2, 2 + Buffer.byteLength(text), text, [text], plain);

describe('LastText', () => {
  it('knows the last text again by its bytes, short or long, and nothing before the first', () => {
    const last = new LastText<string>();
    expect(match(last, '')).toBe(Match.Different);
    for (const text of ['SELECT 1', `SELECT '${'x'.repeat(500)}'`]) {
      keep(last, text);
      expect(match(last, text)).toBe(Match.Same);
      // One byte changed at either end, or one more byte.
      expect(match(last, `Z${text.slice(1)}`)).toBe(Match.Different);
      expect(match(last, `${text.slice(0, -1)}Z`)).toBe(Match.Different);
      expect(match(last, `${text} `)).toBe(Match.Different);
      expect(last.statements).toEqual([text]);
    }
  });

  it('a text too long to keep is the last text, and never matched', () => {
    const last = new LastText<string>();
    keep(last, 'SELECT 1');
    const long = `SELECT '${'x'.repeat(5000)}'`;
    keep(last, long);
    expect(last.text).toBe(long);
    expect(match(last, long)).toBe(Match.Different);
    expect(match(last, 'SELECT 1')).toBe(Match.Different);
  });

  it('other digits in the same places are Digits for a plain text only', () => {
    const last = new LastText<string>();
    keep(last, 'SELECT * FROM t WHERE id = 41;');
    expect(match(last, 'SELECT * FROM t WHERE id = 42;')).toBe(Match.Different);
    keep(last, 'SELECT * FROM t WHERE id = 41;', [0, 29]);
    expect(match(last, 'SELECT * FROM t WHERE id = 42;')).toBe(Match.Digits);
    expect(match(last, 'SELECT * FROM t WHERE id = 41;')).toBe(Match.Same);
    expect(match(last, 'SELECT * FROM t WHERE id = 4a;')).toBe(Match.Different);
    expect(match(last, 'SELECT * FROM t WHERE id = 4;;')).toBe(Match.Different);
  });
});
