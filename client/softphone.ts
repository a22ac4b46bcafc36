/**
 * The softphone page's script (served with the page at `/phone`, api/routes/phone.ts): sign in with a pasted token,
 * see incoming calls, answer or decline them, mute, hang up, see the call's state. It drives `switchboard/phone`
 * (./phone.ts) and nothing else. The token stays in the page's memory only.
 *
 * Ring modes (docs/phones.md): a `ring` call plays a ringtone (440 + 480 Hz, 2 s on, 4 s off, made with Web Audio
 * once the sign-in click allowed the page to play sound) while it waits; a `silent` one is only listed; a `muted`
 * one rings and is answered muted (the Mute button then reads Unmute).
 */
import { createPhone, type Phone, type PhoneCall } from './phone.js';

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the page has no #${id}`);
  return found as T;
}

const form = element<HTMLFormElement>('sign-in');
const tokenField = element<HTMLTextAreaElement>('token');
const baseUrlField = element<HTMLInputElement>('base-url');
const status = element<HTMLElement>('status');
const incoming = element<HTMLUListElement>('incoming');
const callPanel = element<HTMLElement>('call');
const callState = element<HTMLElement>('call-state');
const callParty = element<HTMLElement>('call-party');
const muteButton = element<HTMLButtonElement>('mute');
const hangUpButton = element<HTMLButtonElement>('hang-up');
const remoteAudio = element<HTMLAudioElement>('remote-audio');
const log = element<HTMLOListElement>('log');

baseUrlField.value = location.origin;
let phone: Phone | undefined;
let audio: AudioContext | undefined;
let ringtone: (() => void) | undefined;
/** The offers waiting here that ring out loud. */
const loud = new Set<string>();

/** Starts or stops the ringtone to match `loud`. */
function ringOrNot(): void {
  if (loud.size === 0) {
    ringtone?.();
    ringtone = undefined;
    return;
  }
  if (ringtone !== undefined || audio === undefined) return;
  const context = audio;
  const gain = context.createGain();
  gain.gain.value = 0;
  gain.connect(context.destination);
  const tones = [440, 480].map((frequency) => {
    const oscillator = context.createOscillator();
    oscillator.frequency.value = frequency;
    oscillator.connect(gain);
    oscillator.start();
    return oscillator;
  });
  const cadence = () => {
    gain.gain.setValueAtTime(0.1, context.currentTime);
    gain.gain.setValueAtTime(0, context.currentTime + 2);
  };
  cadence();
  const timer = setInterval(cadence, 6000);
  document.body.dataset.ringing = 'true';
  ringtone = () => {
    clearInterval(timer);
    for (const oscillator of tones) oscillator.stop();
    gain.disconnect();
    delete document.body.dataset.ringing;
  };
}

function showMuted(): void {
  muteButton.textContent = phone?.muted === true ? 'Unmute' : 'Mute';
}

/**
 * This browser's device: a clientId made once and kept in localStorage, so that a reload (or another tab of this
 * browser) registers the same device again, and another browser of the same person (a second computer, another
 * profile) is a phone of its own that rings beside it. Where storage is refused, an id for this page only.
 */
function browserClientId(): string {
  const key = 'switchboard-softphone-client-id';
  const fresh = `softphone-${crypto.randomUUID()}`;
  try {
    const kept = localStorage.getItem(key);
    if (kept !== null && /^[!-~]{1,200}$/.test(kept)) return kept;
    localStorage.setItem(key, fresh);
  } catch {
    // Storage is off for this page: the device lasts as long as the page.
  }
  return fresh;
}

function note(text: string): void {
  const item = document.createElement('li');
  item.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  log.prepend(item);
}

function showCall(call: PhoneCall | undefined, state: string): void {
  callPanel.hidden = call === undefined;
  callState.textContent = state;
  callState.dataset.state = state;
  callParty.textContent = call === undefined ? '' : `${call.from} → ${call.to}`;
  callParty.dataset.offerId = call?.id ?? '';
}

function ringing(call: PhoneCall): void {
  const item = document.createElement('li');
  item.dataset.offerId = call.id;
  item.dataset.mode = call.mode;
  item.append(`${call.from} → ${call.to}${call.mode === 'ring' ? '' : ` (${call.mode})`} `);
  const stopRinging = () => {
    loud.delete(call.id);
    ringOrNot();
  };
  const answer = document.createElement('button');
  answer.textContent = 'Answer';
  answer.className = 'answer';
  answer.onclick = () => {
    item.remove();
    stopRinging();
    showCall(call, 'answering');
    call.accept().catch(() => {});
  };
  const decline = document.createElement('button');
  decline.textContent = 'Decline';
  decline.className = 'decline';
  decline.onclick = () => {
    item.remove();
    stopRinging();
    call.decline().catch(() => {});
  };
  item.append(answer, ' ', decline);
  incoming.append(item);
  if (call.mode !== 'silent') loud.add(call.id);
  ringOrNot();
  note(`incoming call from ${call.from}${call.mode === 'ring' ? '' : ` (${call.mode})`}`);
}

form.onsubmit = async (event) => {
  event.preventDefault();
  phone?.stop();
  // Made in the sign-in click, which lets the page play the ringtone later.
  audio ??= new AudioContext();
  const started = createPhone({
    baseUrl: baseUrlField.value,
    // Read again on a 401: paste a fresh token into the field and the phone goes on with it.
    fetchToken: async () => tokenField.value.trim(),
    device: { kind: 'browser', name: 'Softphone page', clientId: browserClientId() },
  });
  phone = started;
  started.on('registered', ({ deviceId }) => {
    status.textContent = `Ready: device ${deviceId}`;
    status.dataset.deviceId = deviceId;
  });
  started.on('incoming', ringing);
  started.on('connected', ({ call, stream }) => {
    remoteAudio.srcObject = stream;
    void remoteAudio.play().catch(() => {});
    showCall(call, 'connected');
    showMuted();
    note(`connected with ${call.from}`);
  });
  started.on('ended', ({ call, reason }) => {
    incoming.querySelector(`[data-offer-id="${call.id}"]`)?.remove();
    loud.delete(call.id);
    ringOrNot();
    if (callParty.dataset.offerId === call.id) showCall(call, `ended (${reason})`);
    note(`call from ${call.from} ended: ${reason}`);
  });
  started.on('error', (error) => note(`error: ${error.message}${error.code ? ` (${error.code})` : ''}`));
  status.textContent = 'Signing in…';
  try {
    await started.start();
  } catch (error) {
    status.textContent = `Not signed in: ${(error as Error).message}`;
  }
};

muteButton.onclick = () => {
  phone?.mute(!phone.muted);
  showMuted();
};

hangUpButton.onclick = () => void phone?.hangUp();
