/** What the call engine's calls share: the database, SIP, media, prompts, carriers, metrics, log and clock. */
import type pg from 'pg';
import type { Clock } from '../../core/clock.ts';
import type { IceServer } from '../../core/config.ts';
import type { RingableDevices } from '../../core/devices/devices.ts';
import type { EndedQueueCall } from '../../core/queues/entries.ts';
import type { Log } from '../../core/log.ts';
import type { Prompts } from '../media/prompts.ts';
import type { WebRtcMediaFactory } from '../media/webrtc-endpoint.ts';
import type { PortPool } from '../media/rtp.ts';
import type { CarrierDirectory } from '../sip/carriers.ts';
import type { SipEndpoint } from '../sip/sip-endpoint.ts';
import type { CallMetrics } from './metrics.ts';

/** An offer distribution has just committed: the entry as it is now, and the members it is offered to. */
export interface EntryOffer {
  offeredAt: Date;
  memberIds: readonly string[];
  /** The members' devices, read once the offer was committed (the ring round then reads none). */
  ringable?: RingableDevices;
}

/** The engine's distributor as a queue's wait sees it (steps/queue/distributor.ts). */
export interface QueueWatch {
  /**
   * Calls `onChange` whenever the entry may have changed (a notice names it, a distribution here offered it, notices
   * may have been missed), and has the queue distributed now; returns the function that stops watching. A
   * distribution of this engine that has just offered the entry passes the offer (`offered`): the entry need not be
   * read again to ring its agents.
   */
  watch(entryId: string, queueId: string, onChange: (offered?: EntryOffer) => void): () => void;
  /**
   * The agent's queue call ended: the agent goes to the queue's wrap-up (or `available`), with the device the call
   * was on freed in the same write; endings that come together are written together. Resolves once committed.
   */
  callEnded(end: EndedQueueCall): Promise<void>;
}

export interface CallServices {
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
  /** Where this engine's queue entries hear of their offers. */
  queues: QueueWatch;
  /** Where voicemail recordings go. */
  recordingsDir: string;
  metrics: CallMetrics;
  log: Pick<Log, 'info' | 'warn'>;
  /** Opens carriers' sealed SIP passwords, to answer their digest challenges. */
  carrierSecrets: Uint8Array;
  /** STUN and TURN servers of the WebRTC legs (ICE_SERVERS); none: host candidates only. */
  iceServers?: readonly IceServer[];
  /** Makes a browser leg's WebRTC media: the stack WEBRTC_MEDIA names (engine/call-engine.ts). */
  webrtcMedia: WebRtcMediaFactory;
  /** The time plan steps go by (`hours`); default the system clock. Tests fix it at chosen instants. */
  clock?: Clock;
}
