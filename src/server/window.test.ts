import { costFromEmptyWindows, delta, describeCounters, nonZero, subtractCost } from './window';

describe('delta', () => {
  it('subtracts per counter and counts a counter that appeared from 0', () => {
    expect(delta({ Questions: 10, Com_insert: 2 }, { Questions: 14, Com_insert: 2, Connections: 1 })).toEqual({
      Com_insert: 0,
      Connections: 1,
      Questions: 4,
    });
  });
});

describe('subtractCost', () => {
  it('removes the measured cost from a raw window', () => {
    expect(subtractCost({ Questions: 5, Com_select: 3, Com_insert: 1 }, { Questions: 4, Com_select: 3 })).toEqual({
      Com_insert: 1,
      Com_select: 0,
      Questions: 1,
    });
  });

  it('does not cancel to the raw window (the old after - c.before - (m.before - c.before) trap)', () => {
    // Three snapshots: control start A, window start B, window end C; cost measured separately as 4.
    const A = { Questions: 100 };
    const B = { Questions: 104 };
    const C = { Questions: 109 };
    const cost = { Questions: 4 };
    const trap = C.Questions - A.Questions - (B.Questions - A.Questions); // == C - B, the raw window
    expect(trap).toBe(5);
    expect(subtractCost(delta(B, C), cost)).toEqual({ Questions: 1 });
    expect(subtractCost(delta(A, B), cost)).toEqual({ Questions: 0 });
  });

  it('leaves a negative residue visible when the cost was over-estimated', () => {
    expect(subtractCost({ Questions: 3 }, { Questions: 4 })).toEqual({ Questions: -1 });
  });
});

describe('costFromEmptyWindows', () => {
  it('is stable when every empty window moved the same', () => {
    const cost = costFromEmptyWindows([
      { Questions: 4, Bytes_received: 593 },
      { Questions: 4, Bytes_received: 593 },
      { Questions: 4, Bytes_received: 593 },
    ]);
    expect(cost).toEqual({ counters: { Bytes_received: 593, Questions: 4 }, pairs: 3, stable: true, unstable: {} });
  });

  it('is unstable, naming the counter and values, when windows disagree', () => {
    const cost = costFromEmptyWindows([{ Questions: 4 }, { Questions: 5 }, { Questions: 4 }]);
    expect(cost.stable).toBe(false);
    expect(cost.unstable).toEqual({ Questions: [4, 5, 4] });
  });

  it('treats a counter missing from one window as 0 there', () => {
    const cost = costFromEmptyWindows([{ Questions: 4 }, { Questions: 4, Connections: 1 }]);
    expect(cost.unstable).toEqual({ Connections: [0, 1] });
  });

  it('is never stable from fewer than two windows', () => {
    expect(costFromEmptyWindows([{ Questions: 4 }]).stable).toBe(false);
    expect(costFromEmptyWindows([]).stable).toBe(false);
  });
});

describe('nonZero and describeCounters', () => {
  it('keeps only what moved and renders signs', () => {
    expect(nonZero({ a: 0, b: 2, c: -1 })).toEqual({ b: 2, c: -1 });
    expect(describeCounters({ b: 2, c: -1 })).toBe('b +2, c -1');
    expect(describeCounters({})).toBe('nothing');
  });
});
