/**
 * Connecting a party to the caller: the one place a call's caller is bridged to whoever answered (a ring round's
 * browser, desk phone or cell, a forward, a transfer's target, a queue's agent, a supervisor's device through its
 * port). The party's leg exists and has answered; from there it goes the same way for every kind of leg:
 *
 * 1. the caller's media and the party's are bridged as a connection (connection.ts: hold, consultation, release,
 *    rewiring reach it there), the party's leg told of holds when it has signalling of its own (hold-signal.ts);
 * 2. the leg is recorded `answered` (its first answer's time is kept) and the call `connected` with it
 *    (`call.connected`), or, for a round beside the call's own connection, that round is told (`AsideRound`);
 * 3. the two stay bridged until the party hangs up, the call is over (`stop`) or the connection is released (a
 *    transfer), whichever comes first; our BYE goes to a party that did not hang up;
 * 4. the leg closes (its media, what it holds) and its record's end, with its counts, is written.
 *
 * The caller side is the call's caller leg, or a stand-in for a round beside the connection (a warm transfer's
 * agent, a supervisor's port). What the party's device or agent becomes afterwards (free, wrap-up) is the asker's.
 */
import { type ConnectedLeg, setLegState } from '../../core/calls/calls.ts';
import type { BridgeEndpoint } from '../media/bridge.ts';
import { type AsideRound, bridgeCaller, type CallerMedia, reportConnected } from './connection.ts';
import { holdSignal } from './hold-signal.ts';
import { farEndHungUp, type Leg } from './leg.ts';
import type { CallServices } from './services.ts';

/** What a party is connected to. */
export interface CallerSide {
  callId: string;
  /** The caller's media (or a round's stand-in for it). */
  caller: CallerMedia;
  /** Stops the connection: aborts when the call is over (or the round beside its connection is). */
  stop: AbortSignal;
  /** Set for a round beside the call's own connection: told of the party instead of `call.connected`. */
  aside?: AsideRound | undefined;
}

/** A party that answered: its leg, and who it is as `call.connected` names it. */
export interface Party {
  leg: Leg<BridgeEndpoint>;
  who: Omit<ConnectedLeg, 'id'>;
  /** Bridged to the caller instead of the leg's own media (a desk phone rung `muted`); closed with the leg. */
  heard?: BridgeEndpoint & { close(): void };
}

/**
 * Connects `party` to `side` until either hangs up (see the file's comment). Resolves once the connection is over,
 * with the write of the leg's end still going (`ended`): the asker frees the party's device beside it.
 */
export async function connectParty(
  services: CallServices,
  side: CallerSide,
  party: Party,
): Promise<{ ended: Promise<void> }> {
  const { pool, metrics } = services;
  const { leg } = party;
  try {
    const connection = bridgeCaller(
      side.caller,
      party.heard ?? leg.media,
      holdSignal(services, side.callId, leg, 'inactive'),
    );
    // Listening from now: the party may hang up while the call is recorded connected.
    const farEnd = farEndHungUp(leg, connection.until(side.stop));
    await setLegState(pool, leg.id, 'answered');
    await reportConnected(pool, side, { id: leg.id, ...party.who }, connection);
    const hungUp = await farEnd;
    connection.end();
    if (!hungUp) await leg.bye();
  } catch (error) {
    close(party);
    throw error;
  }
  const counts = close(party);
  if (counts.rtp !== undefined) metrics.countRtp(counts.rtp);
  return { ended: setLegState(pool, leg.id, 'ended', counts) };
}

function close(party: Party): ReturnType<Leg['close']> {
  party.heard?.close();
  return party.leg.close();
}
