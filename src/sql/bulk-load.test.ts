import { bulkLoadOf } from './bulk-load';

describe('bulkLoadOf', () => {
  it.each([
    ['COPY t (a, b) FROM STDIN', 'copy-from-stdin'],
    ['  -- load\n/* x */ copy "t" from stdin with (format binary)', 'copy-from-stdin'],
    ["COPY t FROM '/tmp/file.csv'", null],
    ['COPY t TO STDOUT', null],
    ["LOAD DATA LOCAL INFILE 'f' INTO TABLE t", 'load-data-local'],
    ["load data concurrent local infile 'f' into table t", 'load-data-local'],
    ["LOAD DATA INFILE '/var/lib/f' INTO TABLE t", null],
    ['INSERT INTO t VALUES (1)', null],
    ["SELECT 'COPY t FROM STDIN'", null],
  ])('%s -> %s', (sql, kind) => {
    expect(bulkLoadOf(sql)).toBe(kind);
  });
});
