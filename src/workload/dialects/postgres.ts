import { checksumSelect, exponentDouble } from './types';
import type { Dialect } from './types';

export const POSTGRES_DIALECT: Dialect = {
  name: 'postgres',
  defaultSchema: 'public',
  quoteIdent: (name) => `"${name}"`,
  placeholder: (index) => `$${index}`,
  createTableSql: (table) =>
    `CREATE TABLE ${table} (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, c1 INT, c2 INT, c3 VARCHAR(32), ` +
    `c4 DOUBLE PRECISION, c5 BIGINT, c6 VARCHAR(32))`,
  // An E'' string is escape-processed whatever standard_conforming_strings says; a plain one only holds when no
  // backslash is inside, so text with a backslash takes the E form.
  textLiteral: (value) => (value.includes('\\') ? `E'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'` : `'${value.replace(/'/g, "''")}'`),
  doubleLiteral: exponentDouble,
  asText: (expression) => `(${expression})::text`,
  checksumSql(table) {
    return checksumSelect(POSTGRES_DIALECT, table, {
      div: (a, b) => `(${a} / ${b})`,
      mod: (a, b) => `(${a} % ${b})`,
      bytes: (e) => `octet_length(${e})`,
    });
  },
};
