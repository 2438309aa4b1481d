import { DRIVERS } from './registry';
import type { CallGroup, ModelContext } from './module';
import { UNBOUNDED } from './module';

const ctx: ModelContext = { capabilities: { bulkExecute: true, wireProtocol: 'postgres' }, driverOptions: {}, driverVersion: null, claimPrepare: () => 0 };

function group(sql: string, calls: number, errors = 0, simple = calls): CallGroup {
  return {
    kind: 'query',
    sql,
    statementClass: 'other',
    connectionId: 1,
    calls,
    parameterSets: calls,
    callsWithParameterSets: calls,
    callsWithValues: 0,
    errors,
    byProtocol: { simple, extended: 0, named: 0, cursor: 0, describe: 0 },
  };
}

describe('the driver models of the bulk loads', () => {
  it('pg: a COPY FROM STDIN is a Query, any number of CopyData, a CopyDone; a failed one may have sent a CopyFail', () => {
    const ok = DRIVERS.pg.model(group('COPY t (a) FROM STDIN', 2), ctx);
    expect(ok.wire).toMatchObject({
      Query: { min: 2, max: 2 },
      CopyData: { min: 0, max: UNBOUNDED },
      CopyDone: { min: 2, max: 2 },
      CopyFail: { min: 0, max: 0 },
    });
    expect(ok.server.statements).toEqual({ min: 2, max: 2 });
    const failed = DRIVERS.pg.model(group('COPY t (a) FROM STDIN', 1, 1), ctx);
    expect(failed.wire).toMatchObject({ CopyDone: { min: 0, max: 1 }, CopyFail: { min: 0, max: 1 } });
  });

  it('postgres.js: a CopyFail follows every CopyDone', () => {
    const ok = DRIVERS['postgres-js'].model(group('COPY t (a) FROM STDIN', 1), ctx);
    expect(ok.wire).toMatchObject({ Query: { min: 1, max: 1 }, CopyDone: { min: 1, max: 1 }, CopyFail: { min: 1, max: 1 } });
  });

  it('a COPY from a file or to STDOUT sends no data messages', () => {
    expect(DRIVERS.pg.model(group("COPY t FROM '/tmp/f'", 1), ctx).wire.CopyData).toBeUndefined();
    expect(DRIVERS.pg.model(group('COPY t TO STDOUT', 1), ctx).wire.CopyDone).toBeUndefined();
  });

  it('mysql2 and mariadb: LOAD DATA LOCAL is a COM_QUERY, data packets and one empty packet ending the file', () => {
    for (const driver of ['mysql2', 'mariadb'] as const) {
      const c = DRIVERS[driver].model(group("LOAD DATA LOCAL INFILE 'f' INTO TABLE t", 1), {
        ...ctx,
        capabilities: { bulkExecute: false, wireProtocol: 'mysql' },
      });
      expect(c.wire).toEqual({ COM_QUERY: { min: 1, max: 1 }, LocalInfileData: { min: 0, max: UNBOUNDED }, LocalInfileEnd: { min: 1, max: 1 } });
      expect(c.server.statements).toEqual({ min: 1, max: 1 });
    }
    const plain = DRIVERS.mysql2.model(group("LOAD DATA INFILE '/var/lib/f' INTO TABLE t", 1), {
      ...ctx,
      capabilities: { bulkExecute: false, wireProtocol: 'mysql' },
    });
    expect(plain.wire).toEqual({ COM_QUERY: { min: 1, max: 1 } });
  });
});
