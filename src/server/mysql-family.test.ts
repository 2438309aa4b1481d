import { perThreadCounters, type CounterRow } from './mysql-family';

describe('perThreadCounters', () => {
  const events: CounterRow[] = [
    { ID: 7, NAME: 'statement/sql/insert', N: 10 },
    { ID: 8, NAME: 'statement/sql/insert', N: 10 },
    { ID: 8, NAME: 'statement/com/Quit', N: 1 },
  ];
  const status: CounterRow[] = [
    { ID: 7, NAME: 'Questions', N: '11' },
    { ID: 7, NAME: 'Handler_write', N: '10' },
    { ID: 7, NAME: 'Bytes_sent', N: '900' },
    { ID: 9, NAME: 'Questions', N: '0' },
  ];

  it("leaves out a thread with statement events but no status rows: it is ending, its status already in the server's", () => {
    const byId = perThreadCounters([7, 8, 9, 10], events, status, ['Questions', 'Handler_write']);
    expect(Object.fromEntries(byId)).toEqual({
      7: { 'statement/sql/insert': 10, Questions: 11, Handler_write: 10 },
      // A new connection with no statement yet is known, all 0.
      9: { Questions: 0 },
    });
  });
});
