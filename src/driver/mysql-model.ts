import { countStatements } from '../sql/tokenizer';
import { bulkLoadOf } from '../sql/bulk-load';
import { classCounts, rangeText, UNBOUNDED, type Contribution, type DriverModel, type Range } from './module';

/*
 * What mysql2 and the mariadb connector share: the MySQL protocol, so one model of how their calls cross the wire
 * and what the server counts. Only `batch` differs, and only the connector has it.
 */

export const one = (n = 1): Range => ({ min: n, max: n });
export const upTo = (n: number): Range => ({ min: 0, max: n });

/** Whether a batch goes out as bulk commands: the server must advertise it and the connector option be on. */
export function bulkInForce(ctx: Parameters<DriverModel>[1]): boolean {
  return ctx.capabilities.bulkExecute && ctx.driverOptions.bulk !== false;
}

/** Why a batch goes out as one execute per row, in words for the reconciliation line. */
export function noBulkReason(ctx: Parameters<DriverModel>[1]): string {
  return !ctx.capabilities.bulkExecute
    ? 'the server does not advertise COM_STMT_BULK_EXECUTE, so the connector pipelines one execute per row'
    : 'the bulk option is off, so the connector pipelines one execute per row';
}

/**
 * A driver prepares implicitly once per connection and SQL text; the statement may already be cached from before
 * the window, so the first group of a text in the window prepares 0 or 1 times, later ones never.
 */
export const mysqlProtocolModel: DriverModel = (group, ctx): Contribution => {
  const prepare: Range = group.kind !== 'query' ? upTo(ctx.claimPrepare()) : one(0);
  const n = one(group.calls);
  switch (group.kind) {
    case 'query': {
      // A COM_QUERY may carry several statements (`multipleStatements`): the server counts each.
      const each = group.sql.indexOf(';') === -1 ? 1 : countStatements(group.sql, 'mysql');
      const statements = one(group.calls * each);
      // LOAD DATA LOCAL: the server asks for the file and the client sends it, data packets (as many as the driver
      // writes: the plan says) and an empty one, unless the call failed before or as it was asked.
      const infile = bulkLoadOf(group.sql) === 'load-data-local';
      const ok = Math.max(0, group.calls - group.errors);
      return {
        wire: infile ? { COM_QUERY: n, LocalInfileData: { min: 0, max: UNBOUNDED }, LocalInfileEnd: { min: ok, max: group.calls } } : { COM_QUERY: n },
        // The text's class is its first statement's: the others' classes are not known, so no class is predicted.
        server: { statements, prepares: one(0), executes: one(0), ...(each === 1 ? classCounts(group, statements) : {}) },
        wireWords: infile ? '1 COM_QUERY + LOCAL INFILE data packets and an empty one' : '1 COM_QUERY',
        serverWords: each === 1 ? '1 statement' : `${each} statements`,
      };
    }
    case 'prepare':
      return {
        wire: { COM_STMT_PREPARE: prepare },
        server: { prepares: prepare, statements: one(0) },
        wireWords: '0-1 COM_STMT_PREPARE (cached per connection)',
        serverWords: '0-1 prepare',
      };
    case 'execute':
      return {
        wire: { COM_STMT_PREPARE: prepare, COM_STMT_EXECUTE: n },
        // Questions counts COM_STMT_EXECUTE but not COM_STMT_PREPARE.
        server: { statements: n, prepares: prepare, executes: n, bulkExecutes: one(0), ...classCounts(group, n) },
        wireWords: '1 COM_STMT_EXECUTE (+ 1 COM_STMT_PREPARE per connection and SQL, unless cached)',
        serverWords: '1 execute',
      };
    case 'batch': {
      const sets = group.parameterSets;
      if (bulkInForce(ctx)) {
        // One bulk command per chunk: split by max_allowed_packet or a change of parameter types.
        const bulk: Range = { min: group.callsWithParameterSets, max: sets };
        return {
          wire: { COM_STMT_PREPARE: prepare, COM_STMT_BULK_EXECUTE: bulk },
          server: { statements: bulk, prepares: prepare, executes: bulk, bulkExecutes: bulk, ...classCounts(group, bulk) },
          wireWords: `${rangeText(bulk)} COM_STMT_BULK_EXECUTE`,
          serverWords: 'as many executes as bulk commands',
        };
      }
      const executes = one(sets);
      return {
        wire: { COM_STMT_PREPARE: prepare, COM_STMT_EXECUTE: executes },
        server: { statements: executes, prepares: prepare, executes, bulkExecutes: one(0), ...classCounts(group, executes) },
        wireWords: `${group.calls === 1 ? sets : 'its parameter sets as'} COM_STMT_EXECUTE (no bulk: ${noBulkReason(ctx)})`,
        serverWords: `${group.calls === 1 ? `${sets} executes` : 'one execute per parameter set'}`,
      };
    }
  }
};
