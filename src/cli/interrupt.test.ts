import { interruptible } from './interrupt';

describe('interruptible', () => {
  afterEach(() => jest.restoreAllMocks());

  it('aborts at the first signal and says so; at the second runs `second`, uninstalls itself and raises the signal again', () => {
    const kill = jest.spyOn(process, 'kill').mockImplementation(() => true);
    const lines: string[] = [];
    const seconds: string[] = [];
    const before = process.listenerCount('SIGINT');
    const interrupt = interruptible((line) => lines.push(line), {
      first: (signal) => `stopping (${signal} again to stop at once)`,
      second: () => seconds.push('second'),
      keepBackends: true,
    });
    expect(process.listenerCount('SIGINT')).toBe(before + 1);
    process.emit('SIGTERM');
    expect(interrupt.signal.aborted).toBe(true);
    expect(interrupt.signal.reason).toBe('SIGTERM');
    expect(lines).toEqual(['SIGTERM: stopping (SIGTERM again to stop at once)']);
    expect(kill).not.toHaveBeenCalled();
    process.emit('SIGINT');
    expect(seconds).toEqual(['second']);
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGINT');
    expect(process.listenerCount('SIGINT')).toBe(before);
    interrupt.release();
  });

  it('release uninstalls both handlers and leaves the signal unaborted', () => {
    const before = [process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')];
    const interrupt = interruptible(() => undefined, { first: () => 'x', keepBackends: false });
    interrupt.release();
    expect([process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')]).toEqual(before);
    expect(interrupt.signal.aborted).toBe(false);
  });
});
