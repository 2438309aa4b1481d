import { CaptureSession } from './capture';
import { DeferredWorkTracker } from './deferred-work';

describe('a begin() window that is never ended', () => {
  it('close() turns off the hook that follows its work, and does not wait for that work', async () => {
    const trackers = new Set<DeferredWorkTracker>();
    const open = DeferredWorkTracker.prototype.open;
    const spy = jest.spyOn(DeferredWorkTracker.prototype, 'open').mockImplementation(function (this: DeferredWorkTracker, ambient?: boolean) {
      trackers.add(this);
      return open.call(this, ambient);
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const session = await CaptureSession.open({ backend: 'sqlite' });
      await session.begin();
      timer = setTimeout(() => undefined, 3_600_000);
      expect([...trackers].map((t) => t.following)).toEqual([true]);
      await session.close();
      expect([...trackers].map((t) => t.following)).toEqual([false]);
    } finally {
      clearTimeout(timer);
      spy.mockRestore();
    }
  });
});
