import { DEPARTED_RECENT_MS, departedBefore, forgetDepartures, noteDeparture } from './departures';

const A = { host: '127.0.0.1', port: 3306 };
const B = { host: '127.0.0.1', port: 5432 };
const S = 1e9;

describe('departures', () => {
  afterEach(() => forgetDepartures());

  it('lists what closed before the window and within the horizon, per server', () => {
    noteDeparture(A, 7, 100 * S);
    noteDeparture(A, 8, 104 * S);
    noteDeparture(B, 9, 104 * S);
    noteDeparture(A, 10, 106 * S);
    // 10 closed after this window began.
    expect(departedBefore(A, 105 * S)).toEqual([7, 8]);
    // 7 left more than the horizon before this one.
    expect(departedBefore(A, 100.5 * S + DEPARTED_RECENT_MS * 1e6)).toEqual([8, 10]);
    expect(departedBefore(B, 105 * S)).toEqual([9]);
    expect(departedBefore({ host: '127.0.0.1', port: 1 }, 105 * S)).toEqual([]);
  });

  it('lists an id once when it closed twice (a PostgreSQL pid reused)', () => {
    noteDeparture(B, 9, 100 * S);
    noteDeparture(B, 9, 101 * S);
    expect(departedBefore(B, 102 * S)).toEqual([9]);
  });

  it('stays bounded: what fell out of the horizon goes at the next note, and at most 4096 are kept', () => {
    for (let i = 0; i < 5000; i++) noteDeparture(A, i, 200 * S + i);
    const kept = departedBefore(A, 201 * S);
    expect(kept).toHaveLength(4096);
    expect(kept[0]).toBe(5000 - 4096);
    noteDeparture(A, 1, 200 * S + DEPARTED_RECENT_MS * 1e6 + 1e6);
    expect(departedBefore(A, 200 * S + DEPARTED_RECENT_MS * 1e6 + 2e6)).toEqual([1]);
  });
});
