// @ts-check
// Plain JavaScript: Jest loads a test sequencer with Node's own require, before any transform runs.
const fs = require('node:fs');
const TestSequencer = require('@jest/test-sequencer').default;

/**
 * Files that spend most of their time waiting (a frozen server's timeouts, servers started and killed one after
 * another) say so in their head: `@waits <seconds>`, roughly what the file takes on an idle machine.
 */
const WAITS = /@waits\s+(\d+)/;
const HEAD_BYTES = 2048;

/** @param {string} file */
function declaredSeconds(file) {
  let fd;
  try {
    fd = fs.openSync(file, 'r');
    const head = Buffer.alloc(HEAD_BYTES);
    const n = fs.readSync(fd, head, 0, HEAD_BYTES, 0);
    const m = WAITS.exec(head.subarray(0, n).toString('utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * Longest first, by the last run's timing or else the waits a file declares; failed files still go first. Jest's own
 * order puts files without a timing first, by size, so a small file with long waits could start late and hold up the run.
 */
class WaitersFirst extends TestSequencer {
  /**
   * @override
   * @param {import('@jest/test-result').Test[]} tests
   */
  sort(tests) {
    // Jest's sort also sets each test's duration from its cache, and leaves files of equal standing by size.
    const sorted = /** @type {import('@jest/test-result').Test[]} */ (super.sort(tests));
    /** @param {import('@jest/test-result').Test} t */
    const expectedMs = (t) => t.duration ?? declaredSeconds(t.path) * 1000;
    // hasFailed is private in Jest's types only: the base class's own sort calls it the same way.
    const base = /** @type {{ hasFailed(t: import('@jest/test-result').Test): boolean }} */ (/** @type {unknown} */ (this));
    const keyed = sorted.map((t) => ({ t, failed: base.hasFailed(t), ms: expectedMs(t) }));
    // Array#sort is stable: files with neither a timing nor a declaration keep Jest's order.
    keyed.sort((a, b) => (a.failed !== b.failed ? (a.failed ? -1 : 1) : b.ms - a.ms));
    return keyed.map((k) => k.t);
  }
}

module.exports = WaitersFirst;
