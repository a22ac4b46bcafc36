/**
 * The engine's outgoing INVITE, shared by a dial-out through a carrier (dial-out.ts) and the ringing of a registered
 * SIP device (steps/ring/desk-phones.ts): our Contact on the chosen transport and the SDP offer of the leg's RTP endpoint (G.711).
 */
import type { OutgoingInviteRequest, OutgoingRequestMessage, URI, UserAgentCore } from 'sip.js/lib/core/index.js';
import type { RtpEndpoint } from '../media/rtp.ts';
import { offer as offerSdp, SdpError } from '../media/sdp.ts';
import type { Protocol } from '../sip/addressing.ts';
import { engineUser } from '../sip/sip-endpoint.ts';
import type { CallServices } from './services.ts';

/** An INVITE to `target` (the Request-URI) offering `media`, made on `protocol`'s core; not sent yet. */
export function makeInvite(
  services: CallServices,
  protocol: Protocol,
  uris: { target: URI; from: URI; to: URI },
  media: RtpEndpoint,
  extraHeaders: readonly string[] = [],
): { core: UserAgentCore; message: OutgoingRequestMessage } {
  const { host, port } = services.sip;
  const core = services.sip.core(protocol);
  const message = core.makeOutgoingRequestMessage(
    'INVITE',
    uris.target,
    uris.from,
    uris.to,
    {},
    [`Contact: <sip:${engineUser}@${host}:${port};transport=${protocol}>`, ...extraHeaders],
    {
      contentDisposition: 'session',
      contentType: 'application/sdp',
      content: offerSdp({ address: services.rtpAdvertisedHost, port: media.localPort }),
    },
  );
  return { core, message };
}

/** CANCELs an INVITE still ringing; one already answered or refused is left alone. */
export function cancelInvite(invite: OutgoingInviteRequest | undefined): void {
  try {
    invite?.cancel();
  } catch {
    // Already final.
  }
}

/** Why a description is refused, as a peer may be told: an `SdpError`'s message, else that it cannot be read. */
export function refusedMedia(error: unknown): string {
  return error instanceof SdpError ? error.message : 'unreadable SDP';
}

/** `text` fit for a quoted-string of a header: quotes, backslashes and control characters become `'`. */
function quoted(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this removes
  return `"${text.replace(/["\\\u0000-\u001f\u007f]/g, "'").slice(0, 200)}"`;
}

/** A Reason header (RFC 3326) telling the far end why we hang up on its answer: a 488's cause and our text. */
export function reasonHeader(reason: string): string {
  return `Reason: SIP;cause=488;text=${quoted(reason)}`;
}

/** The answer refusing an offer we cannot use (RFC 3261 section 21.4.26), with the reason in a Warning. */
export function notAcceptable(error: unknown): { statusCode: number; reasonPhrase: string; extraHeaders: string[] } {
  return {
    statusCode: 488,
    reasonPhrase: 'Not Acceptable Here',
    extraHeaders: [`Warning: 399 switchboard ${quoted(refusedMedia(error))}`],
  };
}
