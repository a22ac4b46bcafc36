/**
 * The phones bench's workspace (bench/phones.ts), made through the REST API the way a backend and its users' phones
 * make it: `users` users, each with a user token (`devices:*`), one registered browser device and a number whose
 * plan rings that user alone (`ring`, simultaneous, 30 s, then `hangup`); and a number of carrier `farCarrier` whose
 * plan forwards to that carrier (the carrier-only calls).
 */
import type pg from 'pg';
import { createApplication } from '../core/identity/applications.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { apiCaller, numberRunning } from './engine-process.ts';

export interface Person {
  token: string;
  /** The number that rings this person alone. */
  number: string;
  /** The device registered first; `second` once a second one is. */
  first: string;
  second?: string;
}

export async function setUpPeople(pool: pg.Pool, apiUrl: string, users: number, farCarrier: string) {
  const { apiKey } = await createApplication(pool, 'bench', defaultKeyScopes);
  const call = apiCaller(apiUrl, apiKey);
  const workspace = await call('POST', '/workspaces', {
    externalWorkspaceId: 'bench',
    name: 'Bench',
    timezone: 'Europe/Paris',
    limits: { concurrentCalls: 10_000, devicesPerUser: 5 },
  });
  const person = async (index: number): Promise<Person> => {
    const externalUserId = `user-${index}`;
    const user = await call('POST', '/users', { externalUserId, displayName: externalUserId }, workspace.id);
    const { token } = await call<{ token: string }>('POST', '/sessions', {
      externalWorkspaceId: 'bench',
      externalUserId,
      scopes: ['devices:*'],
    });
    const device = await apiCaller(apiUrl, token)('POST', '/devices', { kind: 'browser', clientId: 'first' });
    const number = await numberRunning(pool, call, workspace.id, '630', {
      entry: 'ring',
      steps: {
        ring: { type: 'ring', targets: [{ userId: user.id }], strategy: 'simultaneous', timeoutSecs: 30, next: 'bye' },
        bye: { type: 'hangup', message: null },
      },
    });
    return { token, number, first: device.id };
  };
  const people: Person[] = [];
  for (let from = 0; from < users; from += 10) {
    const batch = Array.from({ length: Math.min(10, users - from) }, (_, offset) => person(from + offset));
    people.push(...(await Promise.all(batch)));
  }
  const forwardNumber = await numberRunning(
    pool,
    call,
    workspace.id,
    '631',
    {
      entry: 'fwd',
      steps: {
        fwd: { type: 'forward', to: '+15550009999', timeoutSecs: 30, next: 'bye' },
        bye: { type: 'hangup', message: null },
      },
    },
    farCarrier,
  );
  return { people, ringNumbers: people.map((one) => one.number), forwardNumber };
}

/** Registers a second browser device for each person (`second`). */
export async function addSecondDevices(apiUrl: string, people: Person[]): Promise<void> {
  for (const person of people) {
    const device = await apiCaller(apiUrl, person.token)('POST', '/devices', { kind: 'browser', clientId: 'second' });
    person.second = device.id;
  }
}
