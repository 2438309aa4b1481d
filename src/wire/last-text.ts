import { BufferClass, mathMax } from '../shared/intrinsics';

/** Texts up to this size are kept as bytes, to be known again without decoding. */
const LAST_TEXT_BYTES = 4096;
/** Texts up to this size are compared byte by byte: the native compare's call costs more than the loop. */
const SHORT_COMPARE = 64;

/** How a text compares with the last one kept. */
export const enum Match {
  Different,
  Same,
  /** Other digits in some places, nothing else changed, and the last text is plain (see `LastText.plain`). */
  Digits,
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/**
 * The last text of one kind of message, as bytes and decoded: a client that sends one text again and again (a loop
 * of single-row INSERTs, a benchmark), or gets one answer again and again, has it compared as bytes, not read again.
 */
export class LastText<S> {
  /** The text's bytes are `#bytes[0, #length)`; -1 when none are kept (none yet, or the last text was too long). */
  #bytes = BufferClass.alloc(SHORT_COMPARE);
  #length = -1;
  text = '';
  /** What was read from `text` (its statements), kept with it: never changed by their readers. */
  statements: S[] = [];
  /**
   * Where the one statement of a plain text lies (see plainStatement), else null. Digits open nothing and are in no
   * keyword: a text with other digits in the same places splits the same, its statement of the same class.
   */
  plain: readonly [number, number] | null = null;

  match(bytes: Buffer, start: number, end: number): Match {
    const last = this.#bytes;
    const length = this.#length;
    if (length < 0 || length !== end - start) return Match.Different;
    // Texts that differ in a value written into them (`WHERE aid = 42`) mostly differ near their end: compared from it.
    if (this.plain === null) {
      if (length > SHORT_COMPARE) return bytes.compare(last, 0, length, start, end) === 0 ? Match.Same : Match.Different;
      for (let i = length - 1; i >= 0; i--) if (bytes[start + i] !== last[i]) return Match.Different;
      return Match.Same;
    }
    let digits = false;
    for (let i = length - 1; i >= 0; i--) {
      const c = bytes[start + i] as number;
      const k = last[i] as number;
      if (c === k) continue;
      if (!isDigit(c) || !isDigit(k)) return Match.Different;
      digits = true;
    }
    return digits ? Match.Digits : Match.Same;
  }

  /** `text` is `bytes[start, end)` decoded: the last text from now on, its bytes kept when it is short enough. */
  keep(bytes: Buffer, start: number, end: number, text: string, statements: S[], plain: readonly [number, number] | null): void {
    this.text = text;
    this.statements = statements;
    this.plain = plain;
    const length = end - start;
    if (length > LAST_TEXT_BYTES || length < 0) {
      this.#length = -1;
      return;
    }
    // A text that changes every time is kept every time: copied into the same buffer, grown as needed.
    if (length > this.#bytes.length) this.#bytes = BufferClass.alloc(mathMax(length, 2 * this.#bytes.length));
    const last = this.#bytes;
    if (length > SHORT_COMPARE) bytes.copy(last, 0, start, end);
    else for (let i = 0; i < length; i++) last[i] = bytes[start + i] as number;
    this.#length = length;
  }
}
