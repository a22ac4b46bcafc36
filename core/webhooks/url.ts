/**
 * The URL of a webhook endpoint, checked when it is saved (create, update): https, no credentials, no fragment, at
 * most 2000 characters, and a host that is public by its name. A host given as an IP literal must be a public
 * address (core/webhooks/address.ts); names are re-checked after DNS resolution at every delivery, so here only
 * the names that can never be public are refused: `localhost`, `*.localhost` and single-label names (which resolve
 * through the local search domain). `allowPrivateNetworks` (WEBHOOK_ALLOW_PRIVATE_NETWORKS) lifts the host rules,
 * never the others.
 */
import { describeAddress, isPublicAddress } from './address.ts';

export const maxWebhookUrlLength = 2000;

export interface WebhookUrlOptions {
  allowPrivateNetworks: boolean;
}

/** The URL as it will be stored and called (WHATWG-normalised), or why it is refused (a phrase after "url"). */
export type WebhookUrlCheck = { ok: true; url: string } | { ok: false; problem: string };

function refuse(problem: string): WebhookUrlCheck {
  return { ok: false, problem };
}

export function checkWebhookUrl(raw: string, options: WebhookUrlOptions): WebhookUrlCheck {
  if (raw.length > maxWebhookUrlLength) return refuse(`must be at most ${maxWebhookUrlLength} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('must be an absolute https URL');
  }
  if (url.protocol !== 'https:') return refuse(`must use https, not ${url.protocol.replace(/:$/, '')}`);
  if (url.username !== '' || url.password !== '') return refuse('must not carry a user name or password');
  // An empty fragment ("https://host/#") leaves url.hash empty, so look at the text itself.
  if (raw.includes('#')) return refuse('must not have a fragment (#)');
  if (url.href.length > maxWebhookUrlLength) return refuse(`must be at most ${maxWebhookUrlLength} characters`);
  if (url.hostname === '') return refuse('must name a host');
  if (!options.allowPrivateNetworks) {
    const host = url.hostname.replace(/\.$/, '').toLowerCase();
    const literal = host.startsWith('[') ? host.slice(1, -1) : host;
    // WHATWG parsing turns every IPv4 spelling (0x7f.1, 2130706433, 127.1) into dotted decimal, so a host made of
    // digits and dots is an address.
    const isLiteral = host.startsWith('[') || /^[0-9.]+$/.test(host);
    if (isLiteral) {
      if (!isPublicAddress(literal)) {
        return refuse(`must be on a public host: ${literal} is ${describeAddress(literal)}`);
      }
    } else if (host === 'localhost' || host.endsWith('.localhost')) {
      return refuse(`must be on a public host, not ${host}`);
    } else if (!host.includes('.')) {
      return refuse(`must be on a public host: ${host} is a single-label name`);
    }
  }
  return { ok: true, url: url.href };
}
