/**
 * Packet loss of an incoming RTP stream from its sequence numbers (RFC 3550 appendix A.1, simplified): the expected
 * count is the span from the first to the highest extended sequence number seen, and lost is expected minus
 * received, never below zero (duplicates can make received exceed expected). A new SSRC, or a jump too large to be
 * loss (a restarted sender), starts a new count; the losses counted for earlier sources are kept.
 */

const maxDropout = 3000;
const maxMisorder = 100;

export class LossCounter {
  private ssrc: number | undefined;
  private base = 0;
  /** The highest extended sequence number seen (sequence plus 65,536 per wrap). */
  private highest = 0;
  private received = 0;
  private earlierLost = 0;

  /** Counts one packet of the stream. */
  packet(ssrc: number, sequence: number): void {
    if (this.ssrc !== ssrc) {
      this.restart(ssrc, sequence);
      return;
    }
    const highestSequence = this.highest % 0x10000;
    const delta = (sequence - highestSequence) & 0xffff;
    if (delta === 0) {
      this.received += 1; // a duplicate
    } else if (delta < maxDropout) {
      const cycles = this.highest - highestSequence + (sequence < highestSequence ? 0x10000 : 0);
      this.highest = cycles + sequence;
      this.received += 1;
    } else if (delta <= 0x10000 - maxMisorder) {
      this.restart(ssrc, sequence); // a jump: the sender restarted
    } else {
      this.received += 1; // late or reordered
    }
  }

  /** Packets lost so far, over every source seen. */
  get lost(): number {
    return this.earlierLost + this.currentLost();
  }

  private currentLost(): number {
    if (this.ssrc === undefined) return 0;
    return Math.max(0, this.highest - this.base + 1 - this.received);
  }

  private restart(ssrc: number, sequence: number): void {
    this.earlierLost += this.currentLost();
    this.ssrc = ssrc;
    this.base = sequence;
    this.highest = sequence;
    this.received = 1;
  }
}
