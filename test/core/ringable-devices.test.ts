/**
 * What a ring round rings, read in one statement (core/devices/devices.ts `ringableDevicesOf`; docs/phones.md, "The
 * ring step"): the people's free browser and mobile devices with a live lease, and their free `sip` devices with
 * credentials and the bindings live at the engine's time, each as `liveSipBindings` reads it.
 */
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { registerDevice, ringableDevicesOf, setDeviceBusy, type DeviceKind } from '../../core/devices/devices.ts';
import { liveSipBindings } from '../../core/devices/sip-bindings.ts';
import { issueSipCredentials } from '../../core/devices/sip-credentials.ts';
import { bindDeskPhone, newMember } from '../helpers/contact-center.ts';
import { liveCall, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

test('browser devices are offered, SIP devices come with their live bindings; busy, unbound and unissued ones do not', async (t) => {
  const setup = await workspaceWithUser(service);
  const workspaceId = setup.workspace.id as string;
  const member = { id: await newMember(service.pool, workspaceId) };
  const other = { id: await newMember(service.pool, workspaceId, 'other') };
  const device = async (
    kind: DeviceKind,
    owner: { memberId: string } | { userId: string } = { memberId: member.id },
  ) => {
    const made = await registerDevice(service.pool, workspaceId, owner, { kind, name: kind, clientId: null });
    if (made.outcome !== 'created') throw new Error(`device: ${made.outcome}`);
    return made.device;
  };
  const key = randomBytes(32);
  const t0 = new Date('2026-11-25T09:00:00.000Z');
  const register = (deviceId: string, username: string, uri: string, expiresSecs: number, port: number) =>
    bindDeskPhone(service.pool, { deviceId, username, uri, port, now: t0, expiresSecs });

  const browser = await device('browser');
  const busy = await device('browser');
  await setDeviceBusy(service.pool, busy.id, (await liveCall(service.pool, setup)).id);
  const desk = await device('sip');
  const deskCredentials = await issueSipCredentials(service.pool, key, desk.id);
  await register(desk.id, deskCredentials.username, 'sip:desk@192.0.2.7:5060', 60, 5060);
  await register(desk.id, deskCredentials.username, 'sip:desk2@192.0.2.7:5062', 10, 5062);
  const unbound = await device('sip');
  await issueSipCredentials(service.pool, key, unbound.id);
  await device('sip'); // no credentials: it cannot register, so it is never rung
  const othersPhone = await device('mobile', { memberId: other.id });
  const alices = await device('browser', { userId: setup.user.id as string });

  const at = (seconds: number) => new Date(t0.getTime() + seconds * 1000);
  const early = await ringableDevicesOf(service.pool, workspaceId, { memberIds: [member.id], userIds: [] }, at(5));
  t.deepEqual(
    early.offered.map((row) => row.id),
    [browser.id],
    'the free browser device',
  );
  t.deepEqual(
    early.sip.map((found) => found.device.id),
    [desk.id],
    'the SIP device with credentials and a live binding',
  );
  t.deepEqual(
    early.sip[0]?.bindings,
    await liveSipBindings(service.pool, desk.id, at(5)),
    'its bindings as liveSipBindings reads them',
  );
  t.deepEqual(
    early.sip[0]?.bindings.map((binding) => [binding.contactUri, binding.source.port, binding.expiresAt.getTime()]),
    [
      ['sip:desk@192.0.2.7:5060', 5060, at(60).getTime()],
      ['sip:desk2@192.0.2.7:5062', 5062, at(10).getTime()],
    ],
    'the freshest first',
  );
  t.is(early.sip[0]?.device.sip_username, deskCredentials.username);

  const later = await ringableDevicesOf(service.pool, workspaceId, { memberIds: [member.id], userIds: [] }, at(30));
  t.deepEqual(
    later.sip[0]?.bindings.map((binding) => binding.contactUri),
    ['sip:desk@192.0.2.7:5060'],
    'a binding past its expiry at the engine time is not rung',
  );
  const gone = await ringableDevicesOf(service.pool, workspaceId, { memberIds: [member.id], userIds: [] }, at(61));
  t.deepEqual(gone.sip, [], 'a SIP device with no live binding is left out');

  const both = await ringableDevicesOf(
    service.pool,
    workspaceId,
    { memberIds: [other.id], userIds: [setup.user.id as string] },
    at(5),
  );
  t.deepEqual(
    both.offered.map((row) => row.id).sort(),
    [othersPhone.id, alices.id].sort(),
    'mobile devices too, of members and users alike',
  );
  const elsewhere = await workspaceWithUser(service);
  const none = await ringableDevicesOf(
    service.pool,
    elsewhere.workspace.id as string,
    { memberIds: [member.id], userIds: [setup.user.id as string] },
    at(5),
  );
  t.deepEqual(none, { offered: [], sip: [] }, "another workspace's people ring nothing here");
});
