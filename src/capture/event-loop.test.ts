import { EventLoopDelayRecorder } from './event-loop';

describe('EventLoopDelayRecorder', () => {
  it('does not count the idle gap between two runs as a delay', async () => {
    const recorder = new EventLoopDelayRecorder();
    const GAP_MS = 300;
    await recorder.around(async () => undefined);
    await new Promise((resolve) => setTimeout(resolve, GAP_MS));
    await recorder.around(async () => undefined);
    const r = recorder.result();
    expect(r.count).toBeGreaterThan(0);
    // Nothing held the loop in either run; the gap between them must not show as one 300 ms "delay".
    expect(r.maxNs!).toBeLessThan(GAP_MS * 1_000_000);
  });

  it('sees a synchronous block in the tick after it', async () => {
    const recorder = new EventLoopDelayRecorder();
    const BLOCK_NS = 30_000_000n;
    await recorder.around(async () => {
      const start = process.hrtime.bigint();
      while (process.hrtime.bigint() - start < BLOCK_NS) {
        // hold the loop like a synchronous driver does
      }
    });
    const r = recorder.result();
    expect(r.count).toBeGreaterThan(0);
    // A lower bound set by the block itself, which a slower machine can only raise: not a wall-clock guess.
    expect(r.maxNs).not.toBeNull();
    expect(r.maxNs!).toBeGreaterThanOrEqual(Number(BLOCK_NS) - r.resolutionNs);
  });
});
