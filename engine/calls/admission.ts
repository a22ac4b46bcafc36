/**
 * Admission of calls from carriers (docs/calls.md): an INVITE from a configured carrier to a number with a published
 * plan assigned is answered with our SDP, recorded as a call, and run through the plan version published at that
 * moment. Any other source gets 403, a number without a plan 404, an offer without PCMU or PCMA 488 (as one whose
 * media address the carrier could not receive at: engine/media/media-peer.ts), no free media port 503. A CANCEL before the answer gets 487 for the INVITE, and the call is still written (`caller_cancelled`).
 */
import type { IncomingInviteRequest, UserAgentCore } from 'sip.js/lib/core/index.js';
import { addLeg, type CallRow, endCall, setLegState, startCall } from '../../core/calls/calls.ts';
import { e164Pattern } from '../../core/ids.ts';
import { publishedPlanFor } from '../../core/numbers/numbers.ts';
import { type RtpEndpoint, RtpEndpoint as Media } from '../media/rtp.ts';
import { answer as answerSdp, parseSdp } from '../media/sdp.ts';
import type { Source } from '../sip/transport.ts';
import { dialedOf } from '../sip/sip-endpoint.ts';
import type { ActiveCalls } from './active-calls.ts';
import { Call } from './call.ts';
import { notAcceptable } from './invite.ts';
import { SipDialogLeg } from './legs/sip-dialog.ts';
import type { CallServices } from './services.ts';

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

export class Admission {
  constructor(
    private readonly services: CallServices,
    private readonly calls: ActiveCalls,
  ) {}

  /** An INVITE outside a dialog. Never throws: every failure is an answer to the caller. */
  onInvite(request: IncomingInviteRequest, _core: UserAgentCore, source: Source): void {
    this.handle(request, source).catch((error: unknown) => {
      this.services.log.warn({ err: error, from: source.address }, 'INVITE failed');
      try {
        request.reject({ statusCode: 500 });
      } catch {
        // Already answered.
      }
    });
  }

  private async handle(request: IncomingInviteRequest, source: Source): Promise<void> {
    const { services } = this;
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
          services.log.warn({ err: error }, 'could not answer a cancelled INVITE with 487');
        }
      },
    };
    const carrier = await services.carriers.carrierFor(source.address);
    if (carrier === undefined) {
      if (!cancelled) request.reject({ statusCode: 403, reasonPhrase: 'Not a configured carrier' });
      return;
    }
    // Numbers are kept in E.164: anything else dialed names none of them (and may hold what PostgreSQL refuses).
    const dialed = dialedOf(request.message);
    const target = e164.test(dialed) ? await publishedPlanFor(services.pool, dialed) : undefined;
    if (target === undefined) {
      if (!cancelled) request.reject({ statusCode: 404, reasonPhrase: 'No routing plan for this number' });
      return;
    }
    let offer;
    try {
      offer = parseSdp(request.message.body);
    } catch (error) {
      if (!cancelled) request.reject(notAcceptable(error));
      return;
    }
    let media: RtpEndpoint;
    try {
      media = await Media.open(services.ports, services.rtpHost, {
        peer: services.carriers.mediaPeer(carrier, source.address),
      });
    } catch {
      if (!cancelled) {
        request.reject({ statusCode: 503, reasonPhrase: 'No media port free', extraHeaders: ['Retry-After: 5'] });
      }
      return;
    }
    let answered: ReturnType<typeof answerSdp>;
    try {
      answered = answerSdp(offer, { address: services.rtpAdvertisedHost, port: media.localPort });
      // The offer's address must be one the carrier's media can be at (a MediaAddressError otherwise: 488).
      media.setRemote(answered.remote);
    } catch (error) {
      media.close();
      if (!cancelled) request.reject(notAcceptable(error));
      return;
    }
    // A CANCEL may already have come (answered, and the INVITE with 487): the call is still written,
    // started and then ended as caller_cancelled, so a caller who gave up while it rang shows in the calls and events.
    let row: CallRow | undefined;
    let callerLeg: string | undefined;
    let response: ReturnType<IncomingInviteRequest['accept']>;
    try {
      row = await startCall(services.pool, {
        applicationId: target.application_id,
        workspaceId: target.workspace_id,
        direction: 'inbound',
        from: callerOf(request.message.from.uri.user),
        to: target.e164,
        phoneNumberId: target.phone_number_id,
        routingPlanId: target.routing_plan_id,
        routingPlanVersion: target.published_version,
        engineOwner: services.owner,
        sipCallId: request.message.callId,
      });
      services.metrics.started.inc();
      callerLeg = await addLeg(services.pool, row.id, {
        role: 'caller',
        remote: `${source.address}:${source.port} via ${carrier.name}`,
        sipCallId: request.message.callId,
      });
      if (cancelled) {
        // CANCEL came before the answer (the INVITE has its 487): the call ends unanswered.
        media.close();
        await endCall(services.pool, row.id, 'caller_cancelled');
        services.metrics.ended('caller_cancelled');
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
        if (callerLeg !== undefined) await setLegState(services.pool, callerLeg, 'ended').catch(() => {});
        await endCall(services.pool, row.id, 'engine_error').then(
          () => services.metrics.ended('engine_error'),
          () => {},
        );
      }
      throw error;
    }
    // From the 200 on, nothing waits until the session hears the caller: a BYE may come right after the ACK.
    const leg = new SipDialogLeg(callerLeg, response.session, media, {
      answered: { advertisedHost: services.rtpAdvertisedHost },
    });
    const call = new Call(row, target.carrier, leg, services, (ended) => this.calls.forget(ended));
    this.calls.add(call);
    await call.run(target.definition);
  }
}
