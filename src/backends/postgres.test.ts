import path from 'node:path';
import { postgresLogFile, postgresServerArgs } from './postgres';

describe('postgresServerArgs', () => {
  it('gives a private server one log file of its own inside the data directory, each line with its pid', () => {
    const args = postgresServerArgs('/tmp/sqltally-x-postgres-1', 5555);
    const settings = Object.fromEntries(args.flatMap((a, i) => (args[i - 1] === '-c' ? [a.split('=', 2) as [string, string]] : [])));
    expect(settings).toMatchObject({ logging_collector: 'on', log_rotation_age: '0', log_rotation_size: '0', log_line_prefix: '%m [%p] ' });
    expect(path.join(settings.log_directory!, settings.log_filename!)).toBe(postgresLogFile('/tmp/sqltally-x-postgres-1'));
    expect(postgresLogFile('/tmp/sqltally-x-postgres-1').startsWith('/tmp/sqltally-x-postgres-1/')).toBe(true);
  });

  it('keeps dynamic shared memory in the data directory (removed at stop), not in /dev/shm', () => {
    const args = postgresServerArgs('/tmp/sqltally-x-postgres-1', 5555);
    expect(args).toContain('dynamic_shared_memory_type=mmap');
  });
});
