/**
 * A connection: the caller's media bridged to one party's (docs/contact-center.md, "Call control"). A party is
 * connected to the caller in one place, connect-party.ts (a ring round's browser, desk phone or cell, a forward, a
 * transfer's target, a queue's agent, a supervisor), which makes one with `bridgeCaller`, registered under the
 * caller's media; the call's commands reach it there (`connectionOf`):
 *
 * - hold (operation 54): the bridge stops both ways, the caller hears the hold music (engine/media/hold-music.ts), the
 *   party silence; resumed, the music stops and the two are bridged again. Twice the same is once. SIP parties are told
 *   (hold-signal.ts): the party's signal given by the maker of the connection, the caller's by the call with each hold;
 *   a caller whose connection ended held is told of the resume when it is bridged again (a transfer's next party),
 *   never just before the call ends. A consultation is not signalled as a hold (the party talks to someone else): a
 *   held connection's legs are told of a resume while it lasts and of the hold again after it, if the connection is
 *   still held.
 * - consult (a warm transfer's first half, transfer.ts): as held, but kept apart from hold, so that the application's
 *   hold and resume during the consultation change nothing until it ends.
 * - release (a transfer): `released` aborts; the code that made the connection waits on `until(stop)`, so it stops
 *   waiting, hangs the party up and ends the connection as when the party hangs up, and the call goes on.
 * - moveCaller (a warm transfer's completion): the connection's caller side becomes another media (the consultation
 *   with the transfer's target was the agent's media bridged to the target's; it becomes the caller's).
 * - rewire (supervision): the plain two-way bridge is replaced by another wiring of the two (a mix with a third
 *   party) until the returned function restores it; hold and consult stop whichever wiring is in place.
 */
import type { Pool } from 'pg';
import { changeState, type ConnectedLeg } from '../../core/calls/calls.ts';
import { type BridgeEndpoint, bridge } from '../media/bridge.ts';
import { holdMusicLoop } from '../media/hold-music.ts';
import type { RtpEndpoint } from '../media/rtp.ts';
import { playLooped } from '../media/looped-audio.ts';
import type { HoldSignal } from './hold-signal.ts';

/** The signals a connection's hold takes (made by the call and by the makers of connections). */
export { holdSignal } from './hold-signal.ts';

/** A caller side: what can be bridged and can hear the hold music. */
export type CallerMedia = BridgeEndpoint & Pick<RtpEndpoint, 'play'>;

/** How the two sides of a connection are joined while neither held nor consulting: returns the unjoin. */
export type Wiring = (caller: CallerMedia, party: BridgeEndpoint) => () => void;

/** The connections now up, by their caller's media (one at a time per caller). */
const connections = new WeakMap<object, Connection>();

/** Callers whose connection ended held, by their media: the resume to send once they are bridged again. */
const heldCallers = new WeakMap<object, HoldSignal>();

export class Connection {
  private unjoin: (() => void) | undefined;
  private music: AbortController | undefined;
  private held = false;
  private consulting = false;
  private ended = false;
  private wiring: Wiring = bridge;
  private readonly releaseController = new AbortController();
  /** Whether the SIP parties were last told of a hold, and the caller leg's signal (the last given). */
  private signalled = false;
  private callerHold: HoldSignal | undefined;
  private readonly endController = new AbortController();

  constructor(
    private callerSide: CallerMedia,
    readonly party: BridgeEndpoint,
    private readonly partyHold?: HoldSignal,
  ) {
    connections.set(callerSide, this);
    resumeHeldCaller(callerSide);
    this.apply();
  }

  get caller(): CallerMedia {
    return this.callerSide;
  }

  /** Aborts when the party is to be let go (a transfer). */
  get released(): AbortSignal {
    return this.releaseController.signal;
  }

  /** Aborts once the connection has ended (the party gone or released, the call over): a supervisor's leg goes. */
  get over(): AbortSignal {
    return this.endController.signal;
  }

  /** How long the code that made the connection keeps it: until the call goes or the party is released. */
  until(stop: AbortSignal): AbortSignal {
    return AbortSignal.any([stop, this.released]);
  }

  get isHeld(): boolean {
    return this.held;
  }

  /** Holds or resumes; `callerHold` tells the caller's leg (the call's, hold-signal.ts). */
  hold(on: boolean, callerHold?: HoldSignal): void {
    this.callerHold = callerHold ?? this.callerHold;
    this.held = on;
    this.apply();
    this.signal();
  }

  /** The caller held apart (music) while the party talks to someone else (`on`), or bridged back. */
  consult(on: boolean): void {
    this.consulting = on;
    this.apply();
    this.signal();
  }

  /** Lets the party go: the maker of the connection hangs the party up and ends the connection. */
  release(): void {
    this.releaseController.abort();
  }

  /** The caller side becomes `caller` (registered under it from now); bridged at once unless held. */
  moveCaller(caller: CallerMedia): void {
    if (this.ended) return;
    this.stopMedia();
    if (connections.get(this.callerSide) === this) connections.delete(this.callerSide);
    this.callerSide = caller;
    connections.set(caller, this);
    resumeHeldCaller(caller);
    this.apply();
  }

  /** Joins the two sides by `wiring` instead of the plain bridge; the returned function puts the bridge back. */
  rewire(wiring: Wiring): () => void {
    this.stopMedia();
    this.wiring = wiring;
    this.apply();
    return () => {
      if (this.wiring !== wiring) return;
      this.stopMedia();
      this.wiring = bridge;
      this.apply();
    };
  }

  /** Stops the media between the two (the caller side keeps no music); calling it again is fine. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.stopMedia();
    if (this.signalled && this.callerHold !== undefined) heldCallers.set(this.callerSide, this.callerHold);
    if (connections.get(this.callerSide) === this) connections.delete(this.callerSide);
    this.endController.abort();
  }

  /** Brings the media in line with the state: bridged, music to the caller, or nothing once ended. */
  private apply(): void {
    if (this.ended) return;
    const apart = this.held || this.consulting;
    if (apart && this.music === undefined) {
      this.unjoin?.();
      this.unjoin = undefined;
      this.music = new AbortController();
      playLooped(this.callerSide, holdMusicLoop(), this.music.signal);
    } else if (!apart && this.unjoin === undefined) {
      this.music?.abort();
      this.music = undefined;
      this.unjoin = this.wiring(this.callerSide, this.party);
    }
  }

  /** Tells the SIP parties when the hold they know of changed. */
  private signal(): void {
    const on = this.held && !this.consulting;
    if (this.ended || on === this.signalled) return;
    this.signalled = on;
    this.callerHold?.(on);
    this.partyHold?.(on);
  }

  private stopMedia(): void {
    this.unjoin?.();
    this.unjoin = undefined;
    this.music?.abort();
    this.music = undefined;
  }
}

/**
 * Bridges `caller` and `party` as a connection (see the file's comment); `end` it when the party has hung up.
 * `partyHold` tells the party's leg of a hold (hold-signal.ts).
 */
export function bridgeCaller(caller: CallerMedia, party: BridgeEndpoint, partyHold?: HoldSignal): Connection {
  return new Connection(caller, party, partyHold);
}

/** A caller whose last connection ended held is told of the resume, now that it is bridged again. */
function resumeHeldCaller(caller: object): void {
  const resume = heldCallers.get(caller);
  heldCallers.delete(caller);
  resume?.(false);
}

/** The connection whose caller side is `caller`, if one is up. */
export function connectionOf(caller: object): Connection | undefined {
  return connections.get(caller);
}

/**
 * A round that does not change the call's state (it stays `connected` to its party): `call.ringing` is written with
 * the call as it is, and the answering party, once bridged to the round's `caller`, is told to `connected` instead
 * of being written as `call.connected`. The round then lasts, as any, until either side hangs up or the connection
 * is released.
 */
export interface AsideRound {
  connected(leg: ConnectedLeg, connection: Connection): void;
}

/** The call becomes `connected` with `leg` (`call.connected`), or an aside round is told of it. */
export async function reportConnected(
  pool: Pool,
  round: { callId: string; aside?: AsideRound | undefined },
  leg: ConnectedLeg,
  connection: Connection,
): Promise<void> {
  if (round.aside !== undefined) round.aside.connected(leg, connection);
  else await changeState(pool, round.callId, 'connected', { connectedLeg: leg });
}
