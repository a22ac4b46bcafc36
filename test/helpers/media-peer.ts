/**
 * The peers of RTP endpoints in tests (engine/media/media-peer.ts): a carrier whose SIP and media are on loopback, as
 * the tests' sipp and sockets are.
 */
import type { CarrierPeer } from '../../engine/media/media-peer.ts';

export const loopbackCarrier: CarrierPeer = {
  kind: 'carrier',
  name: 'carrier loopback',
  signalling: '127.0.0.1',
  networks: ['127.0.0.1'],
};
