import { checksumSelect, exponentDouble } from './types';
import type { Dialect } from './types';

// Backslash is an escape character unless sql_mode has NO_BACKSLASH_ESCAPES; a hex literal with a charset
// introducer means the same bytes in either mode, so text containing one goes that way.
const NEEDS_HEX = /[\\]/;

export const MYSQL_DIALECT: Dialect = {
  name: 'mysql',
  defaultSchema: null,
  quoteIdent: (name) => `\`${name}\``,
  placeholder: () => '?',
  createTableSql: (table) =>
    `CREATE TABLE ${table} (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, c1 INT, c2 INT, c3 VARCHAR(32), ` +
    `c4 DOUBLE PRECISION, c5 BIGINT, c6 VARCHAR(32)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
  textLiteral: (value) => (NEEDS_HEX.test(value) ? `_utf8mb4 X'${Buffer.from(value, 'utf8').toString('hex')}'` : `'${value.replace(/'/g, "''")}'`),
  doubleLiteral: exponentDouble,
  asText: (expression) => `CAST(${expression} AS CHAR)`,
  checksumSql(table) {
    return checksumSelect(MYSQL_DIALECT, table, {
      div: (a, b) => `${a} DIV ${b}`,
      mod: (a, b) => `${a} % ${b}`,
      bytes: (e) => `OCTET_LENGTH(${e})`,
    });
  },
};
