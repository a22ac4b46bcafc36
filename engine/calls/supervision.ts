/**
 * Supervision of a connected call (operation 56, docs/contact-center.md "Call control"), driven by the call's
 * commands (commands.ts). A supervisor's leg is a round beside the call's connection (an aside round: the call stays
 * `connected` to its party) that rings the supervisor's devices; the round's caller side is the supervisor's port,
 * a stand-in media endpoint of this file. Once a device answers, the caller's connection (connection.ts) is re-wired
 * through a mixer (engine/media/mixer.ts) of the caller, the party and the supervisor:
 *
 * - the supervisor hears the caller and the party, mixed;
 * - the party hears the caller, and the supervisor too in `whisper` and `barge`;
 * - the caller hears the party, and the supervisor too in `barge` only (`listen` drops the supervisor's audio).
 *
 * Keys still cross between caller and party as on the plain bridge. A second request for the same supervisor while
 * their leg rings or is up changes only the mode (the routing of the mix). One supervisor is mixed in at a time:
 * another supervisor answering hangs up the leg of the one before. Hold and a warm transfer's consultation
 * stop the mix as they stop the bridge (the supervisor hears nothing meanwhile). The supervisor hanging up (or not
 * answering) puts the plain bridge back; the connection ending (the party hangs up, a transfer releases it, the call
 * ends) hangs the supervisor's leg up.
 */
import { type SuperviseCommand, takeSuperviseRequest } from '../../core/calls/commands.ts';
import type { SuperviseMode } from '../../core/calls/supervision.ts';
import { type BridgeEndpoint, bridge } from '../media/bridge.ts';
import { emit, errorReporter } from '../media/listeners.ts';
import { Mixer } from '../media/mixer.ts';
import { frameAt, frameCount, pace } from '../media/player.ts';
import { type AsideRound, type CallerMedia, type Connection, connectionOf, type Wiring } from './connection.ts';
import type { SupervisedCall } from './control.ts';
import type { CallServices } from './services.ts';

type Input = 'caller' | 'party' | 'supervisor';

/** A listener of the supervisor's side that throws: reported as a process warning, as media endpoints do. */
const reportListenerError = errorReporter();

export class Supervisions {
  /** The supervisions whose leg rings or is up, by supervisor. */
  private readonly live = new Map<string, Supervision>();
  /** The supervision mixed into the connection now: one at a time. */
  private mixing: Supervision | undefined;
  /** Commands are acted on one at a time, so a mode change never races the start of its supervision. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly services: CallServices,
    private readonly host: SupervisedCall,
  ) {}

  /** Acts on a recorded request (the notice or the re-read; a request is taken up once). */
  supervise(command: SuperviseCommand): Promise<void> {
    const next = this.chain.then(() => this.act(command));
    this.chain = next.catch(() => {});
    return next;
  }

  private async act(command: SuperviseCommand): Promise<void> {
    const { pool } = this.services;
    const { callId } = this.host;
    const current = this.live.get(command.memberId);
    if (current !== undefined) {
      if (await takeSuperviseRequest(pool, callId, command.memberId, command.id)) current.setMode(command.mode);
      return;
    }
    const caller = this.host.callerMedia();
    const connection = caller === undefined ? undefined : connectionOf(caller);
    // Between parties there is nothing to supervise now; the re-read tries again.
    if (this.host.over.aborted || connection === undefined) return;
    if (!(await takeSuperviseRequest(pool, callId, command.memberId, command.id))) return;
    const supervision = new Supervision(command.mode);
    this.live.set(command.memberId, supervision);
    void this.run(command.memberId, supervision, connection);
  }

  /** The supervisor's round; once it is over, the plain bridge is back. */
  private async run(memberId: string, supervision: Supervision, connection: Connection): Promise<void> {
    const stop = AbortSignal.any([this.host.over, connection.over, connection.released, supervision.replaced.signal]);
    let restore: (() => void) | undefined;
    const aside: AsideRound = {
      connected: () => {
        if (stop.aborted) return;
        // A supervisor answering replaces the one mixed in before, whose leg is hung up.
        this.mixing?.replaced.abort();
        this.mixing = supervision;
        supervision.mixer.start(stop);
        restore = connection.rewire(supervision.wiring);
      },
    };
    try {
      await this.host.ringMember(memberId, { caller: supervision.port, aside, stop });
    } catch (error) {
      this.services.log.warn({ err: error, callId: this.host.callId }, 'a supervisor could not be reached');
    } finally {
      restore?.();
      supervision.stop();
      if (this.mixing === supervision) this.mixing = undefined;
      if (this.live.get(memberId) === supervision) this.live.delete(memberId);
    }
  }
}

/** One supervisor's mix. */
class Supervision {
  readonly mixer = new Mixer<Input>(['caller', 'party', 'supervisor']);
  /** Aborts when another supervisor's leg takes the mix over. */
  readonly replaced = new AbortController();
  /** The round's caller side: what the supervisor's device is bridged to. */
  readonly port: CallerMedia;
  private readonly toSupervisor = new Set<(frame: Int16Array) => void>();
  private readonly playing = new AbortController();
  /** The two sides while the connection is wired through the mix (not while held or consulting). */
  private joined: { caller: CallerMedia; party: BridgeEndpoint } | undefined;

  constructor(private mode: SuperviseMode) {
    this.port = {
      onAudio: (listener) => {
        this.toSupervisor.add(listener);
        return () => this.toSupervisor.delete(listener);
      },
      send: (frame) => this.mixer.input('supervisor', frame),
      // The round's ringback, heard by no one until a device is bridged (and stopped before).
      play: (pcm, signal) => {
        const until = signal === undefined ? this.playing.signal : AbortSignal.any([signal, this.playing.signal]);
        return pace(frameCount(pcm), (index) => this.hear(frameAt(pcm, index)), until);
      },
    };
  }

  /** To every listener of the supervisor's side; one that throws does not keep the frame from the others. */
  private readonly hear = (frame: Int16Array): void => emit(this.toSupervisor, frame, reportListenerError);

  /** Who hears whom, by the mode (nothing while the two sides are not joined). */
  private route(): void {
    const joined = this.joined;
    if (joined === undefined) return this.mixer.route([]);
    this.mixer.route([
      { from: ['caller', 'party'], to: this.hear },
      { from: this.mode === 'listen' ? ['caller'] : ['caller', 'supervisor'], to: (frame) => joined.party.send(frame) },
      { from: this.mode === 'barge' ? ['party', 'supervisor'] : ['party'], to: (frame) => joined.caller.send(frame) },
    ]);
  }

  setMode(mode: SuperviseMode): void {
    this.mode = mode;
    this.route();
  }

  /** The caller's connection joined through the mix; keys cross between the two sides as on the plain bridge. */
  readonly wiring: Wiring = (caller, party) => {
    const stops = [
      caller.onAudio((frame) => this.mixer.input('caller', frame)),
      party.onAudio((frame) => this.mixer.input('party', frame)),
      bridge(keysOf(caller), keysOf(party)),
    ];
    this.joined = { caller, party };
    this.route();
    return () => {
      for (const stop of stops.splice(0)) stop();
      this.joined = undefined;
      this.route();
      this.mixer.clear('caller');
      this.mixer.clear('party');
    };
  };

  stop(): void {
    this.mixer.stop();
    this.playing.abort();
  }
}

/** An endpoint's keys alone: the plain bridge relays them, and the audio goes through the mix. */
function keysOf(endpoint: BridgeEndpoint): BridgeEndpoint {
  return {
    onAudio: () => () => {},
    send: () => {},
    ...(endpoint.onDtmf === undefined ? {} : { onDtmf: endpoint.onDtmf.bind(endpoint) }),
    ...(endpoint.sendDtmf === undefined ? {} : { sendDtmf: endpoint.sendDtmf.bind(endpoint) }),
  };
}
