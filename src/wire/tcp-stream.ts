/** Signed distance `a - b` in TCP's 32-bit sequence space. */
export function seqDiff(a: number, b: number): number {
  return (a - b) | 0;
}

/** Out-of-order bytes one direction may hold while waiting for the hole before them; beyond it the gap is final. */
export const MAX_HELD_BYTES = 16 * 1024 * 1024;

/**
 * One direction of a captured TCP connection, put back in order by sequence number: retransmitted and overlapping
 * bytes are delivered once, a segment after a hole is held until the hole is filled. It cannot see what the capture
 * missed by itself: `missingBefore` compares with what the other side acknowledged.
 */
export class TcpDirection {
  #next: number | null = null;
  #held: { seq: number; data: Buffer }[] = [];
  #heldBytes = 0;
  #finAt: number | null = null;
  #finished = false;
  /** Bytes delivered in order. */
  delivered = 0;
  /** Bytes seen again (retransmits, overlaps) and dropped. */
  duplicateBytes = 0;

  /** The SYN's sequence number: the data starts one after it. */
  start(synSeq: number): void {
    this.#next = (synSeq + 1) >>> 0;
  }

  /** Whether the SYN of this direction was seen, so its bytes can be put in order. */
  get started(): boolean {
    return this.#next !== null;
  }

  /** The FIN was seen and every byte before it delivered. */
  get finished(): boolean {
    return this.#finished;
  }

  get heldBytes(): number {
    return this.#heldBytes;
  }

  /** Hands `deliver` the bytes this segment makes readable, in order, each byte once. */
  segment(seq: number, payload: Buffer, fin: boolean, deliver: (data: Buffer) => void): void {
    if (this.#next === null) return;
    if (fin) this.#finAt = (seq + payload.length) >>> 0;
    if (payload.length > 0) this.#accept(seq, payload, deliver);
    if (this.#finAt !== null && this.#next === this.#finAt) this.#finished = true;
  }

  #accept(seq: number, payload: Buffer, deliver: (data: Buffer) => void): void {
    const next = this.#next as number;
    const offset = seqDiff(seq, next);
    if (offset > 0) {
      this.#hold(seq, payload);
      return;
    }
    if (-offset >= payload.length) {
      this.duplicateBytes += payload.length;
      return;
    }
    this.duplicateBytes += -offset;
    // In order (nearly always): the payload itself, no new view.
    this.#deliver(offset === 0 ? payload : payload.subarray(-offset), deliver);
    while (this.#held.length > 0) {
      const first = this.#held[0]!;
      const gap = seqDiff(first.seq, this.#next as number);
      if (gap > 0) break;
      this.#held.shift();
      this.#heldBytes -= first.data.length;
      if (-gap >= first.data.length) this.duplicateBytes += first.data.length;
      else {
        this.duplicateBytes += -gap;
        this.#deliver(first.data.subarray(-gap), deliver);
      }
    }
  }

  #deliver(data: Buffer, deliver: (data: Buffer) => void): void {
    this.#next = ((this.#next as number) + data.length) >>> 0;
    this.delivered += data.length;
    deliver(data);
  }

  #hold(seq: number, payload: Buffer): void {
    let i = this.#held.length;
    while (i > 0 && seqDiff(this.#held[i - 1]!.seq, seq) > 0) i--;
    if (i > 0 && this.#held[i - 1]!.seq === seq && this.#held[i - 1]!.data.length >= payload.length) {
      this.duplicateBytes += payload.length;
      return;
    }
    // Copied: the capture's chunk it points into is reused by the reader.
    this.#held.splice(i, 0, { seq, data: Buffer.from(payload) });
    this.#heldBytes += payload.length;
  }

  /**
   * Bytes the other side acknowledged (`ack`) that were never delivered here: the capture lost them (kernel drops,
   * a cut record), since on loopback a segment is captured before it is received. 0 when nothing is missing.
   */
  missingBefore(ack: number): number {
    if (this.#next === null) return 0;
    const readable = this.#finished ? (this.#next + 1) >>> 0 : this.#next;
    return Math.max(0, seqDiff(ack, readable) - (this.#finAt !== null && !this.#finished && seqDiff(ack, this.#finAt) > 0 ? 1 : 0));
  }
}
