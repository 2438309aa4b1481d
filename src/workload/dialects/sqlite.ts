import { checksumSelect, exponentDouble } from './types';
import type { Dialect } from './types';

/**
 * SQLite's text-to-double conversion is not correctly rounded far from 1 (bench/HISTORY.md has the figures), so
 * values outside [1e-60, 1e60] take the exact form.
 */
const PLAIN_MIN = 1e-60;
const PLAIN_MAX = 1e60;
const STEP = 60;

/** 2^±60 and below as literals SQLite reads exactly (each checked in the unit tests). */
function powerOfTwoLiteral(exponent: number): string {
  const value = 2 ** exponent;
  return Number.isInteger(value) ? `${value}.0` : String(value);
}

/**
 * `x` as `M * 2^a * 2^b ...` with M the 53-bit significand as an integer: every product is exact, each factor being a
 * power of two and the running value moving monotonically towards x, never leaving its range.
 */
function exactDoubleExpression(x: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const high = view.getUint32(0);
  const low = view.getUint32(4);
  const biased = (high >>> 20) & 0x7ff;
  const fraction = (BigInt(high & 0xfffff) << 32n) | BigInt(low);
  const significand = biased === 0 ? fraction : fraction | (1n << 52n);
  let exponent = (biased === 0 ? 1 : biased) - 1075;
  const factors: string[] = [`${x < 0 ? '-' : ''}${significand}`];
  while (exponent !== 0) {
    const step = Math.max(-STEP, Math.min(STEP, exponent));
    factors.push(powerOfTwoLiteral(step));
    exponent -= step;
  }
  return `(${factors.join(' * ')})`;
}

export const SQLITE_DIALECT: Dialect = {
  name: 'sqlite',
  defaultSchema: null,
  quoteIdent: (name) => `"${name}"`,
  placeholder: () => '?',
  createTableSql: (table) =>
    `CREATE TABLE ${table} (id INTEGER PRIMARY KEY, c1 INT, c2 INT, c3 VARCHAR(32), c4 DOUBLE PRECISION, ` + `c5 BIGINT, c6 VARCHAR(32))`,
  // SQLite has no backslash escapes: doubling the quote is the whole rule.
  textLiteral: (value) => `'${value.replace(/'/g, "''")}'`,
  doubleLiteral(value) {
    const magnitude = Math.abs(value);
    return magnitude === 0 || (magnitude >= PLAIN_MIN && magnitude <= PLAIN_MAX) ? exponentDouble(value) : exactDoubleExpression(value);
  },
  asText: (expression) => `CAST(${expression} AS TEXT)`,
  checksumSql(table) {
    // SUM over int64 raises "integer overflow" in SQLite, hence the split of c5; the parts stay far from 2^63.
    return checksumSelect(SQLITE_DIALECT, table, {
      div: (a, b) => `(${a} / ${b})`,
      mod: (a, b) => `(${a} % ${b})`,
      bytes: (e) => `length(CAST(${e} AS BLOB))`,
    });
  },
};
