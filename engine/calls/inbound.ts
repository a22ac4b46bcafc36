/**
 * Calls from carriers (docs/calls.md): an INVITE from a configured carrier to a number with a published plan
 * assigned is answered with our SDP, recorded as a call, and run through the plan version published at that moment.
 * Any other source gets 403, a number without a plan 404, an offer without PCMU or PCMA 488. Each answered call has
 * one RTP endpoint; the caller's BYE, our hangup (plan, API, shutdown) and the end of the plan all end it once.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import {
  Grammar,
  type IncomingInviteRequest,
  type OutgoingInviteRequest,
  type Session,
  type UserAgentCore,
} from 'sip.js/lib/core/index.js';
import { appendEvent } from '../../core/events/outbox.ts';
import { e164Pattern } from '../../core/ids.ts';
import { openSecret } from '../../core/sealing.ts';
import type { RoutingPlanDefinition } from '../../core/routing/definition.ts';
import type { ScheduleHours } from '../../core/routing/schedule.ts';
import { inTransaction } from '../../core/database.ts';
import { type MediaEndpoint, type PortPool, MediaEndpoint as Media } from '../media/rtp.ts';
import { bridge } from '../media/bridge.ts';
import { answer as answerSdp, offer as offerSdp, parseSdp, remoteFromAnswer, SdpError } from '../media/sdp.ts';
import type { Prompts } from '../media/prompts.ts';
import { WavRecorder } from '../media/recorder.ts';
import type { CarrierDirectory } from '../sip/carriers.ts';
import type { Source } from '../sip/transport.ts';
import { dialedOf, engineUser, type SipEndpoint } from '../sip/user-agent.ts';
import { addLeg, type CallRow, changeState, endCall, setLegState, startCall } from '../../core/calls/calls.ts';
import type { CallMetrics } from './metrics.ts';
import { type CallControl, type Prompt, runPlan } from './runner.ts';

export interface InboundOptions {
  pool: pg.Pool;
  /** The engine's SIP endpoint, for dialing out (forward). */
  sip: SipEndpoint;
  carriers: CarrierDirectory;
  ports: PortPool;
  /** The address RTP sockets bind (RTP_HOST). */
  rtpHost: string;
  /** The address put in our SDP. */
  rtpAdvertisedHost: string;
  prompts: Prompts;
  /** This engine's id (calls.engine_owner). */
  owner: string;
  /** Where voicemail recordings go. */
  recordingsDir: string;
  metrics: CallMetrics;
  log: { info(object: object, message: string): void; warn(object: object, message: string): void };
  /** Opens carriers' sealed SIP passwords, to answer their digest challenges. */
  carrierSecrets: Uint8Array;
  /** The time plan steps go by (`hours`); default the system clock. Tests fix it at chosen instants. */
  clock?: { now(): Date };
}

interface PlanTarget {
  carrier: string;
  application_id: string;
  workspace_id: string;
  phone_number_id: string;
  e164: string;
  routing_plan_id: string;
  published_version: number;
  definition: RoutingPlanDefinition;
}

/** The number dialed, if it is ours, claimed, on the voice lane and running a published plan: that version. */
async function planFor(pool: pg.Pool, dialed: string): Promise<PlanTarget | undefined> {
  const result = await pool.query<PlanTarget>(
    `SELECT n.carrier, w.application_id, n.workspace_id, n.id AS phone_number_id, n.e164, p.id AS routing_plan_id,
            p.published_version, v.definition
       FROM phone_numbers n
       JOIN workspaces w ON w.id = n.workspace_id
       JOIN routing_plans p ON p.id = n.routing_plan_id AND p.archived_at IS NULL AND p.published_version IS NOT NULL
       JOIN routing_plan_versions v ON v.plan_id = p.id AND v.version = p.published_version
      WHERE n.e164 = $1 AND n.voice_lane = 'service'`,
    [dialed],
  );
  return result.rows[0];
}

const e164 = new RegExp(e164Pattern);

/**
 * The caller's number as a call records it: the From user, without control characters (a peer may send NUL, which
 * PostgreSQL refuses in text), at most 64 characters; `anonymous` when there is none.
 */
function callerOf(user: string | undefined): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this removes
  const clean = (user ?? '').replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 64);
  return clean === '' ? 'anonymous' : clean;
}

/** 488: the offer cannot be answered (no PCMU or PCMA, no audio, unreadable), with the reason in a Warning. */
function notAcceptable(request: IncomingInviteRequest, error: unknown): void {
  const reason = error instanceof SdpError ? error.message : 'unreadable SDP';
  request.reject({
    statusCode: 488,
    reasonPhrase: 'Not Acceptable Here',
    extraHeaders: [`Warning: 399 switchboard "${reason.replace(/["\r\n]/g, "'")}"`],
  });
}

/** A 1 kHz beep, 300 ms, before a voicemail recording starts. */
function beep(): Int16Array {
  const samples = new Int16Array(2400);
  for (let i = 0; i < samples.length; i += 1) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 1000 * i) / 8000));
  return samples;
}

/** How long a BYE waits for the caller's ACK: the 200's server transaction gives up after 64 × T1 (32 s). */
const ackWaitMs = 32_000;

class ActiveCall implements CallControl {
  ended = false;
  private readonly gone = new AbortController();
  /** The caller's ACK for our 200 came: only then may our BYE go (RFC 3261 section 15). */
  private acknowledged = false;
  private readonly ackWaiters: Array<() => void> = [];
  private readonly keys: string[] = [];
  private keyWaiter: ((key: string | undefined) => void) | undefined;

  constructor(
    readonly row: CallRow,
    /** The carrier of the called number: forwards leave through it. */
    private readonly carrierName: string,
    private readonly callerLeg: string,
    /** The plan steps taken so far (the runner adds each as it starts); written with the call's end. */
    private readonly taken: string[],
    private readonly session: Session,
    private readonly media: MediaEndpoint,
    private readonly handler: InboundCalls,
  ) {
    media.onDtmf((digit) => {
      const waiter = this.keyWaiter;
      if (waiter !== undefined) {
        this.keyWaiter = undefined;
        waiter(digit);
      } else this.keys.push(digit);
    });
  }

  get signal(): AbortSignal {
    return this.gone.signal;
  }

  async play(prompt: Prompt, options: { stopOnKey?: boolean } = {}): Promise<{ key: string | undefined }> {
    if (this.ended) return { key: undefined };
    let pcm: Int16Array;
    try {
      pcm = await this.handler.options.prompts.pcm(prompt);
    } catch (error) {
      // A prompt that cannot be produced: a second of silence, and the call goes on (docs/calls.md).
      this.handler.options.metrics.promptFailures.inc();
      this.handler.options.log.warn({ callId: this.row.id, err: error }, 'prompt could not be produced; silence');
      pcm = new Int16Array(8000);
    }
    const stop = new AbortController();
    const onGone = () => stop.abort();
    this.gone.signal.addEventListener('abort', onGone, { once: true });
    let pressed: string | undefined;
    let unsubscribe: (() => void) | undefined;
    if (options.stopOnKey === true) {
      // A key pressed before the prompt (typed ahead) answers it at once.
      const early = this.keys.shift();
      if (early !== undefined) {
        this.gone.signal.removeEventListener('abort', onGone);
        return { key: early };
      }
      unsubscribe = this.media.onDtmf((digit) => {
        pressed ??= digit;
        stop.abort();
      });
    }
    try {
      await this.media.play(pcm, stop.signal);
    } finally {
      unsubscribe?.();
      this.gone.signal.removeEventListener('abort', onGone);
    }
    if (pressed !== undefined) {
      // The key that cut the prompt is the answer; the queued copy is not a second press.
      const index = this.keys.indexOf(pressed);
      if (index !== -1) this.keys.splice(index, 1);
    }
    return { key: pressed };
  }

  key(timeoutMs: number): Promise<string | undefined> {
    if (this.ended) return Promise.resolve(undefined);
    const queued = this.keys.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const onGone = () => finish(undefined);
      const finish = (key: string | undefined) => {
        clearTimeout(timer);
        this.gone.signal.removeEventListener('abort', onGone);
        if (this.keyWaiter === finish) this.keyWaiter = undefined;
        resolve(key);
      };
      this.gone.signal.addEventListener('abort', onGone, { once: true });
      this.keyWaiter = finish;
    });
  }

  async voicemail(maxMs: number): Promise<void> {
    if (this.ended) return;
    await this.media.play(beep(), this.gone.signal);
    const file = path.join(this.handler.options.recordingsDir, `${this.row.id}.wav`);
    const recorder = await WavRecorder.open(file);
    const stopRecording = this.media.onAudio((frame) => recorder.write(frame));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, maxMs);
      this.gone.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });
    stopRecording();
    const written = await recorder.close();
    const row = this.row;
    await inTransaction(this.handler.options.pool, async (db) => {
      const inserted = await db.query<{ id: string }>(
        `INSERT INTO recordings (call_id, workspace_id, kind, path, duration_ms) VALUES ($1, $2, 'voicemail', $3, $4)
         RETURNING id`,
        [row.id, row.workspace_id, file, written.durationMs],
      );
      const recordingId = (inserted.rows[0] as { id: string }).id;
      await appendEvent(db, {
        type: 'voicemail.ready',
        streamId: row.id,
        applicationId: row.application_id,
        workspaceId: row.workspace_id,
        externalWorkspaceId: row.external_workspace_id,
        fields: {
          callId: row.id,
          voicemail: {
            id: recordingId,
            recordingId,
            from: row.from_number.slice(0, 64) || 'anonymous',
            to: row.to_number.slice(0, 64),
            durationSeconds: Math.round(written.durationMs / 1000),
          },
        },
      });
    });
  }

  /**
   * Dials `to` through the called number's carrier and, once answered, bridges the two legs until either side hangs
   * up (true). Not answered within `timeoutMs`, refused, or impossible (no carrier, a carrier named only by a CIDR
   * range): false, and the call goes on with the step's `next`.
   */
  async forward(to: string, timeoutMs: number): Promise<boolean> {
    if (this.ended) return false;
    const options = this.handler.options;
    const carrier = await options.carriers.byName(this.carrierName);
    if (carrier === undefined || carrier.address.includes('/')) {
      this.note('step_unavailable', `forward to ${to}: carrier "${this.carrierName}" has no address to dial out to`);
      return false;
    }
    const core = options.sip.core(carrier.transport);
    const host = options.sip.host;
    const target = Grammar.URIParse(`sip:${to}@${carrier.address}:${carrier.port};transport=${carrier.transport}`);
    const from = Grammar.URIParse(`sip:${this.row.to_number}@${host}:${options.sip.port}`);
    if (target === undefined || from === undefined) {
      this.note('step_unavailable', `forward to ${to}: cannot make a SIP URI`);
      return false;
    }
    const leg = await Media.open(options.ports, options.rtpHost).catch(() => undefined);
    if (leg === undefined) {
      this.note('step_unavailable', `forward to ${to}: no media port free`);
      return false;
    }
    await changeState(options.pool, this.row.id, 'offering');
    const message = core.makeOutgoingRequestMessage(
      'INVITE',
      target,
      from,
      target,
      {},
      [`Contact: <sip:${engineUser}@${host}:${options.sip.port};transport=${carrier.transport}>`],
      {
        contentDisposition: 'session',
        contentType: 'application/sdp',
        content: offerSdp({ address: options.rtpAdvertisedHost, port: leg.localPort }),
      },
    );
    // A carrier with an account challenges our INVITE (401 or 407); sip.js answers once with the account.
    let stopSigning = () => {};
    if (carrier.username !== null && carrier.password !== null) {
      let password: string;
      try {
        password = openSecret(options.carrierSecrets, carrier.password);
      } catch {
        leg.close();
        this.note('step_unavailable', `forward to ${to}: carrier "${carrier.name}"'s password cannot be opened`);
        await changeState(options.pool, this.row.id, 'routing');
        return false;
      }
      stopSigning = options.sip.signRequests(message.callId, { username: carrier.username, password });
    }
    try {
      const legId = await addLeg(options.pool, this.row.id, {
        role: 'forward',
        remote: `${to} via ${carrier.name}`,
        sipCallId: message.callId,
      });
      const answered = await new Promise<Session | undefined>((resolve) => {
        let settled = false;
        const settle = (session: Session | undefined) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.gone.signal.removeEventListener('abort', onGone);
          resolve(session);
        };
        // Set once the INVITE is handed to the core; giving up before that has nothing to cancel.
        const pending: { invite?: OutgoingInviteRequest } = {};
        const giveUp = () => {
          try {
            pending.invite?.cancel();
          } catch {
            // Already final.
          }
          settle(undefined);
        };
        const timer = setTimeout(giveUp, timeoutMs);
        const onGone = () => giveUp();
        this.gone.signal.addEventListener('abort', onGone, { once: true });
        pending.invite = core.invite(message, {
          onAccept: (response) => {
            response.ack();
            if (settled) {
              // Answered after we gave up: hang that leg up at once.
              response.session.bye();
              return;
            }
            try {
              leg.setRemote(remoteFromAnswer(parseSdp(response.message.body)));
            } catch {
              response.session.bye();
              settle(undefined);
              return;
            }
            settle(response.session);
          },
          onReject: () => settle(undefined),
        });
      });
      if (answered === undefined || this.ended) {
        leg.close();
        await setLegState(options.pool, legId, 'ended');
        if (answered !== undefined) answered.bye();
        return false;
      }
      await setLegState(options.pool, legId, 'answered');
      await changeState(options.pool, this.row.id, 'connected', { connectedLeg: { id: legId, role: 'forward' } });
      const unbridge = bridge(this.media, leg);
      // Bridged until one side hangs up: the far end's BYE, or the caller's (which ends this call).
      await new Promise<void>((resolve) => {
        answered.delegate = {
          onBye: (bye) => {
            bye.accept();
            resolve();
          },
        };
        this.gone.signal.addEventListener(
          'abort',
          () => {
            try {
              answered.bye();
            } catch {
              // The far end hung up at the same time.
            }
            resolve();
          },
          { once: true },
        );
      });
      unbridge();
      this.countMedia(leg);
      leg.close();
      await setLegState(options.pool, legId, 'ended', { in: leg.stats.packetsIn, out: leg.stats.packetsOut });
      return true;
    } finally {
      stopSigning();
    }
  }

  /** Adds an endpoint's packet counts to the metrics (once, as it closes). */
  countMedia(endpoint: MediaEndpoint): void {
    const metrics = this.handler.options.metrics;
    metrics.rtpPackets.inc({ direction: 'in' }, endpoint.stats.packetsIn);
    metrics.rtpPackets.inc({ direction: 'out' }, endpoint.stats.packetsOut);
    metrics.rtpLost.inc(endpoint.stats.lost);
  }

  async enter(state: 'voicemail' | 'routing'): Promise<void> {
    if (this.ended) return;
    await changeState(this.handler.options.pool, this.row.id, state);
  }

  note(what: 'step_unavailable', detail: string): void {
    this.handler.options.metrics.stepsUnavailable.inc();
    this.handler.options.log.warn({ callId: this.row.id, what }, detail);
  }

  /** The caller acknowledged our 200. */
  acked(): void {
    this.acknowledged = true;
    for (const wake of this.ackWaiters.splice(0)) wake();
  }

  /** Resolves once the caller's ACK came, the call ended, or the 200's transaction gave up on the ACK. */
  private ackOrGiveUp(): Promise<void> {
    if (this.acknowledged || this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ackWaitMs);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.ackWaiters.push(done);
      this.gone.signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Our side ends the call: BYE (once the caller has acknowledged the answer), then the record. */
  async hangup(reason: string): Promise<void> {
    if (this.ended) return;
    // A plan that hangs up at once (a one-step hangup plan) can get here before the caller's ACK: sip.js then
    // refuses the BYE, which goes once the ACK comes (or the 200's transaction gives up).
    if (!this.sendBye()) {
      await this.ackOrGiveUp();
      if (this.ended) return;
      this.sendBye();
    }
    await this.finish(reason);
  }

  /** False only when sip.js refused the BYE for want of the caller's ACK. */
  private sendBye(): boolean {
    try {
      this.session.bye();
      return true;
    } catch (error) {
      // Otherwise the dialog may be gone already (the caller's BYE crossed ours).
      return !(error instanceof Error && error.message.includes('until it has received an ACK'));
    }
  }

  /** The caller hung up (BYE) or the call cannot go on. */
  async finish(reason: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.gone.abort();
    this.countMedia(this.media);
    this.media.close();
    this.handler.forget(this);
    const stats = this.media.stats;
    await setLegState(this.handler.options.pool, this.callerLeg, 'ended', {
      in: stats.packetsIn,
      out: stats.packetsOut,
    });
    const ended = await endCall(this.handler.options.pool, this.row.id, reason, this.taken);
    if (ended !== undefined) this.handler.options.metrics.ended(reason);
  }
}

export class InboundCalls {
  private readonly calls = new Map<string, ActiveCall>();

  constructor(readonly options: InboundOptions) {}

  get active(): number {
    return this.calls.size;
  }

  forget(call: ActiveCall): void {
    this.calls.delete(call.row.id);
    this.options.metrics.active.set(this.calls.size);
  }

  /** An INVITE outside a dialog. Never throws: every failure is an answer to the caller. */
  onInvite(request: IncomingInviteRequest, _core: UserAgentCore, source: Source): void {
    this.handle(request, source).catch((error: unknown) => {
      this.options.log.warn({ err: error, from: source.address }, 'INVITE failed');
      try {
        request.reject({ statusCode: 500 });
      } catch {
        // Already answered.
      }
    });
  }

  private async handle(request: IncomingInviteRequest, source: Source): Promise<void> {
    // 100 Trying at once (RFC 3261 17.2.1): the lookups below take longer than the 200 ms a carrier waits before
    // it retransmits, and under load every retransmission is parsed again.
    request.trying();
    // Set by a CANCEL before the answer, which is then the INVITE's final response: no other is sent after it.
    let cancelled = false;
    request.delegate = {
      // The core answers the CANCEL itself (200) but leaves the INVITE to us: 487 at once (RFC 3261 section 9.2).
      onCancel: () => {
        if (cancelled) return;
        cancelled = true;
        try {
          request.reject({ statusCode: 487 });
        } catch (error) {
          this.options.log.warn({ err: error }, 'could not answer a cancelled INVITE with 487');
        }
      },
    };
    const carrier = await this.options.carriers.carrierFor(source.address);
    if (carrier === undefined) {
      if (!cancelled) request.reject({ statusCode: 403, reasonPhrase: 'Not a configured carrier' });
      return;
    }
    // Numbers are kept in E.164: anything else dialed names none of them (and may hold what PostgreSQL refuses).
    const dialed = dialedOf(request.message);
    const target = e164.test(dialed) ? await planFor(this.options.pool, dialed) : undefined;
    if (target === undefined) {
      if (!cancelled) request.reject({ statusCode: 404, reasonPhrase: 'No routing plan for this number' });
      return;
    }
    let offer;
    try {
      offer = parseSdp(request.message.body);
    } catch (error) {
      if (!cancelled) notAcceptable(request, error);
      return;
    }
    let media: MediaEndpoint;
    try {
      media = await Media.open(this.options.ports, this.options.rtpHost);
    } catch {
      if (!cancelled) {
        request.reject({ statusCode: 503, reasonPhrase: 'No media port free', extraHeaders: ['Retry-After: 5'] });
      }
      return;
    }
    let answered: ReturnType<typeof answerSdp>;
    try {
      answered = answerSdp(offer, { address: this.options.rtpAdvertisedHost, port: media.localPort });
    } catch (error) {
      media.close();
      if (!cancelled) notAcceptable(request, error);
      return;
    }
    // A CANCEL may already have come (answered, and the INVITE with 487): the call is still written,
    // started and then ended as caller_cancelled, so a caller who gave up while it rang shows in the calls and events.
    let row: CallRow | undefined;
    let callerLeg: string | undefined;
    let response: ReturnType<IncomingInviteRequest['accept']>;
    try {
      row = await startCall(this.options.pool, {
        applicationId: target.application_id,
        workspaceId: target.workspace_id,
        direction: 'inbound',
        from: callerOf(request.message.from.uri.user),
        to: target.e164,
        phoneNumberId: target.phone_number_id,
        routingPlanId: target.routing_plan_id,
        routingPlanVersion: target.published_version,
        engineOwner: this.options.owner,
        sipCallId: request.message.callId,
      });
      this.options.metrics.started.inc();
      callerLeg = await addLeg(this.options.pool, row.id, {
        role: 'caller',
        remote: `${source.address}:${source.port} via ${carrier.name}`,
        sipCallId: request.message.callId,
      });
      if (cancelled) {
        // CANCEL came before the answer (the INVITE has its 487): the call ends unanswered.
        media.close();
        await endCall(this.options.pool, row.id, 'caller_cancelled');
        this.options.metrics.ended('caller_cancelled');
        return;
      }
      response = request.accept({
        statusCode: 200,
        body: { contentDisposition: 'session', contentType: 'application/sdp', content: answered.sdp },
      });
    } catch (error) {
      // The call cannot go on (the caller gets 500): its media port is free again, and a call written already ends.
      media.close();
      if (row !== undefined) {
        if (callerLeg !== undefined) await setLegState(this.options.pool, callerLeg, 'ended').catch(() => {});
        await endCall(this.options.pool, row.id, 'engine_error').then(
          () => this.options.metrics.ended('engine_error'),
          () => {},
        );
      }
      throw error;
    }
    media.setRemote(answered.remote);
    // Listening for keys from the first packet on: a caller may press one right after the ACK.
    const taken: string[] = [];
    // From the 200 on, nothing waits until the session hears the caller: a BYE may come right after the ACK.
    const call = new ActiveCall(row, target.carrier, callerLeg, taken, response.session, media, this);
    this.calls.set(row.id, call);
    this.options.metrics.active.set(this.calls.size);
    response.session.delegate = {
      onAck: () => call.acked(),
      // The caller never acknowledged our 200: a BYE may go now (RFC 3261 section 15).
      onAckTimeout: () => call.acked(),
      onBye: (bye) => {
        bye.accept();
        void call.finish('caller_hangup');
      },
      onInvite: (reinvite) => {
        // A re-INVITE (hold, resume, a new address): answer with the same media, following the new offer.
        try {
          const next = parseSdp(reinvite.message.body);
          const again = answerSdp(next, { address: this.options.rtpAdvertisedHost, port: media.localPort });
          media.setRemote(again.remote);
          reinvite.accept({
            statusCode: 200,
            body: { contentDisposition: 'session', contentType: 'application/sdp', content: again.sdp },
          });
        } catch {
          reinvite.reject({ statusCode: 488 });
        }
      },
    };
    await setLegState(this.options.pool, callerLeg, 'answered');
    await changeState(this.options.pool, row.id, 'routing', { answered: true });
    await runPlan(
      {
        callId: row.id,
        definition: target.definition,
        schedule: (id) => this.schedule(target.workspace_id, id),
        now: () => this.options.clock?.now() ?? new Date(),
      },
      call,
      taken,
    ).catch(async (error: unknown) => {
      this.options.log.warn({ err: error, callId: row.id }, 'routing plan failed; ending the call');
      await call.hangup('plan_error');
    });
  }

  private async schedule(workspaceId: string, id: string): Promise<ScheduleHours | undefined> {
    const result = await this.options.pool.query<{
      timezone: string;
      weekly_hours: ScheduleHours['weeklyHours'];
      exceptions: ScheduleHours['exceptions'];
    }>('SELECT timezone, weekly_hours, exceptions FROM schedules WHERE id = $1::uuid AND workspace_id = $2', [
      id.toLowerCase(),
      workspaceId,
    ]);
    const row = result.rows[0];
    return row === undefined
      ? undefined
      : { timezone: row.timezone, weeklyHours: row.weekly_hours, exceptions: row.exceptions };
  }

  /** The API asked to end a call this engine holds. */
  async hangup(callId: string): Promise<boolean> {
    const call = this.calls.get(callId);
    if (call === undefined) return false;
    await call.hangup('hangup_requested');
    return true;
  }

  /** Shutdown: every call ends with a BYE. */
  async closeAll(reason: string): Promise<void> {
    await Promise.all([...this.calls.values()].map((call) => call.hangup(reason)));
  }

  static async prepare(recordingsDir: string): Promise<void> {
    await mkdir(recordingsDir, { recursive: true });
  }
}
