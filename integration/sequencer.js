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
 * Jest's order (failed first, then longest by the last run's timings, then biggest file), except that files with
 * no timing yet (every file of a fresh clone, every CI run) go by the waits they declare, longest first: by size,
 * Jest would start the small file that waits out three frozen servers last, and the whole run would wait for it.
 */
class WaitersFirst extends TestSequencer {
  /** @param {import('@jest/test-result').Test[]} tests */
  sort(tests) {
    const sorted = /** @type {import('@jest/test-result').Test[]} */ (super.sort(tests));
    if (sorted.some((t) => t.duration != null)) return sorted;
    const seconds = new Map(sorted.map((t) => [t.path, declaredSeconds(t.path)]));
    // Array#sort is stable: files that declare nothing keep Jest's order.
    return sorted.slice().sort((a, b) => (seconds.get(b.path) ?? 0) - (seconds.get(a.path) ?? 0));
  }
}

module.exports = WaitersFirst;
