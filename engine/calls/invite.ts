/**
 * The engine's outgoing INVITE, shared by a dial-out through a carrier (dial-out.ts) and the ringing of a registered
 * SIP device (ring-sip.ts): our Contact on the chosen transport and the SDP offer of the leg's RTP endpoint (G.711).
 */
import type { OutgoingInviteRequest, OutgoingRequestMessage, URI, UserAgentCore } from 'sip.js/lib/core/index.js';
import type { MediaEndpoint } from '../media/rtp.ts';
import { offer as offerSdp } from '../media/sdp.ts';
import type { Protocol } from '../sip/addressing.ts';
import { engineUser } from '../sip/user-agent.ts';
import type { CallServices } from './services.ts';

/** An INVITE to `target` (the Request-URI) offering `media`, made on `protocol`'s core; not sent yet. */
export function makeInvite(
  services: CallServices,
  protocol: Protocol,
  uris: { target: URI; from: URI; to: URI },
  media: MediaEndpoint,
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
