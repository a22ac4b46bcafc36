/**
 * The `switchboard` command: the roles (`all`, `api`, `engine`, `operator`) and the admin commands, which work on
 * `DATABASE_URL` or on the embedded database of `SWITCHBOARD_DATA_DIR` (joining the running service's server).
 */
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { type Config, ConfigError, loadConfig } from '../core/config.ts';
import { announce, carrierMessagingChannel } from '../core/change-notices.ts';
import { inTransaction, openDatabase } from '../core/database.ts';
import { EmbeddedPostgresError } from '../core/embedded-postgres.ts';
import { addCarrier, CarrierInputError } from '../core/carriers/carriers.ts';
import { setCarrierMessaging } from '../core/carriers/messaging.ts';
import {
  ApplicationExists,
  applicationExists,
  createApplication,
  issueKey,
  resetLegacySecret,
} from '../core/identity/applications.ts';
import { createMember, MemberInputError, memberJson } from '../core/identity/members.ts';
import { isApplicationId, isUuid } from '../core/ids.ts';
import {
  type Capability,
  capabilities,
  decideTextingRegistration,
  importNumbers,
  InventoryInputError,
  numberJson,
  TextingRegistrationError,
} from '../core/numbers/numbers.ts';
import { loadSigningKeys } from '../core/service-secret.ts';
import { defaultKeyScopes, parseScopeList, type Scope } from '../core/scopes.ts';
import { type Role, startRoles } from './roles.ts';

const usage = `usage: switchboard <command>

Roles:
  all                      the API, engine and operator in one process (what npm start runs)
  api | engine | operator  one role

Admin commands (on DATABASE_URL, or the embedded database in SWITCHBOARD_DATA_DIR):
  applications create <applicationId> [--scopes a,b]   prints {"applicationId","apiKey"}; the key is shown once
  applications keys create <applicationId> [--scopes a,b]
                                                       issues one more application key (recovery)
  applications secret <applicationId>                  sets the legacy application secret, shown once
  members create --workspace <workspaceId> --email <email> [--name <name>] [--scopes a,b]
                                                       prints the member as JSON
  numbers import --carrier <name> [--capabilities voice,sms,mms] <e164>...
                                                       adds the service's own numbers to the inventory
  numbers texting <e164> approved|rejected             decides the texting campaign a workspace named for its number
                                                       (only approved numbers send messages); prints the number
  carriers add <name> --address <host or CIDR> [--port 5060] [--transport udp|tcp] [--username u --password p]
                    [--media-networks <CIDR or address>,...]
                                                       adds (or replaces) a SIP carrier calls come from and go out through
                                                       (its media only at its address or in its media networks)
  carriers messaging <name> --smpp-host <host> [--smpp-port 2775] --system-id <id> --password <p>
                    [--system-type <t>] [--tls] [--throughput 10] [--mms-url https://…] | --off
                                                       sets (or removes) the SMPP account its texts go through,
                                                       and the HTTP media interface its MMS go through
                                                       (running engines pick it up: docs/messaging.md)
`;

class UsageError extends Error {}

async function withDatabase<T>(config: Config, work: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const database = await openDatabase(config, () => {});
  try {
    return await work(database.pool);
  } finally {
    await database.close();
  }
}

function print(value: unknown) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function applicationIdArgument(value: string | undefined): string {
  if (value === undefined || !isApplicationId(value)) {
    throw new UsageError(`an applicationId matching ^[a-z][a-z0-9_-]{1,63}$ is required, got ${value ?? 'nothing'}`);
  }
  return value;
}

/** `--scopes a,b`: an unknown scope is a usage error (exit 2 with the usage), like any other bad argument. */
function scopesArgument(list: string | undefined): Scope[] {
  if (list === undefined) return [...defaultKeyScopes];
  try {
    return parseScopeList(list);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

async function admin(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      scopes: { type: 'string' },
      workspace: { type: 'string' },
      email: { type: 'string' },
      name: { type: 'string' },
      carrier: { type: 'string' },
      capabilities: { type: 'string' },
      address: { type: 'string' },
      port: { type: 'string' },
      transport: { type: 'string' },
      username: { type: 'string' },
      password: { type: 'string' },
      'media-networks': { type: 'string' },
      'smpp-host': { type: 'string' },
      'smpp-port': { type: 'string' },
      'system-id': { type: 'string' },
      'system-type': { type: 'string' },
      tls: { type: 'boolean' },
      throughput: { type: 'string' },
      'mms-url': { type: 'string' },
      off: { type: 'boolean' },
    },
  });
  const [noun, verb, ...rest] = positionals;
  const scopes = scopesArgument(values.scopes);

  if (noun === 'applications' && verb === 'create' && rest.length === 1) {
    const applicationId = applicationIdArgument(rest[0]);
    print(await withDatabase(config, (pool) => createApplication(pool, applicationId, scopes)));
    return;
  }
  if (noun === 'applications' && verb === 'keys' && rest[0] === 'create' && rest.length === 2) {
    const applicationId = applicationIdArgument(rest[1]);
    print(
      await withDatabase(config, async (pool) => {
        if (!(await applicationExists(pool, applicationId))) throw new UsageError(`no application "${applicationId}"`);
        const issued = await issueKey(pool, {
          applicationId,
          name: 'created by switchboard applications keys',
          scopes,
        });
        return { applicationId, apiKey: issued.secret };
      }),
    );
    return;
  }
  if (noun === 'applications' && verb === 'secret' && rest.length === 1) {
    const applicationId = applicationIdArgument(rest[0]);
    print(
      await withDatabase(config, async (pool) => {
        if (!(await applicationExists(pool, applicationId))) throw new UsageError(`no application "${applicationId}"`);
        return { applicationId, applicationSecret: await resetLegacySecret(pool, applicationId) };
      }),
    );
    return;
  }
  if (noun === 'members' && verb === 'create' && rest.length === 0) {
    if (values.workspace === undefined || !isUuid(values.workspace))
      throw new UsageError('--workspace <uuid> is required');
    if (values.email === undefined) throw new UsageError('--email is required');
    const input = {
      workspaceId: values.workspace.toLowerCase(),
      email: values.email,
      scopes,
      ...(values.name !== undefined ? { name: values.name } : {}),
    };
    print(memberJson(await withDatabase(config, (pool) => createMember(pool, input))));
    return;
  }
  if (noun === 'numbers' && verb === 'import') {
    if (values.carrier === undefined) throw new UsageError('--carrier <name> is required');
    if (rest.length === 0) throw new UsageError('name at least one number in E.164 form, like +14155550100');
    const wanted = (values.capabilities ?? 'voice,sms').split(',').map((item) => item.trim());
    const unknown = wanted.filter((item) => !(capabilities as readonly string[]).includes(item));
    if (unknown.length > 0) {
      throw new UsageError(`unknown capabilities ${unknown.join(', ')}; known: ${capabilities.join(', ')}`);
    }
    const carrier = values.carrier;
    try {
      print(
        await withDatabase(config, (pool) => importNumbers(pool, carrier, rest, [...new Set(wanted)] as Capability[])),
      );
    } catch (error) {
      if (error instanceof InventoryInputError) throw new UsageError(error.message);
      throw error;
    }
    return;
  }
  if (noun === 'numbers' && verb === 'texting' && rest.length === 2) {
    const [e164, decision] = rest as [string, string];
    if (decision !== 'approved' && decision !== 'rejected') throw new UsageError('decide approved or rejected');
    try {
      const row = await withDatabase(config, (pool) =>
        inTransaction(pool, (db) => decideTextingRegistration(db, e164, decision)),
      );
      print(numberJson(row));
    } catch (error) {
      if (error instanceof TextingRegistrationError) throw new UsageError(error.message);
      throw error;
    }
    return;
  }
  if (noun === 'carriers' && verb === 'add' && rest.length === 1) {
    if (values.address === undefined) throw new UsageError('--address <host, address or CIDR> is required');
    if (values.port !== undefined && !/^\d{1,5}$/.test(values.port)) throw new UsageError('--port must be 1-65535');
    const input = {
      name: rest[0] as string,
      address: values.address,
      ...(values.port !== undefined ? { port: Number(values.port) } : {}),
      ...(values.transport !== undefined ? { transport: values.transport } : {}),
      ...(values.username !== undefined ? { username: values.username } : {}),
      ...(values.password !== undefined ? { password: values.password } : {}),
      ...(values['media-networks'] !== undefined
        ? { mediaNetworks: values['media-networks'].split(',').map((network) => network.trim()) }
        : {}),
    };
    try {
      print(
        await withDatabase(config, async (pool) => {
          const keys = await loadSigningKeys(pool, config.secret);
          return addCarrier(pool, keys.carrierSecrets, input);
        }),
      );
    } catch (error) {
      if (error instanceof CarrierInputError) throw new UsageError(error.message);
      throw error;
    }
    return;
  }
  if (noun === 'carriers' && verb === 'messaging' && rest.length === 1) {
    print(await carrierMessaging(config, rest[0] as string, values));
    return;
  }
  throw new UsageError(`unknown command: ${args.join(' ')}`);
}

/** `carriers messaging <name> …`: the carrier's SMPP account set, or removed with `--off`. */
async function carrierMessaging(
  config: Config,
  name: string,
  values: { [option: string]: string | boolean | undefined },
): Promise<unknown> {
  const text = (option: string) => (typeof values[option] === 'string' ? values[option] : undefined);
  const number = (option: string) => {
    const value = text(option);
    if (value === undefined) return undefined;
    if (!/^\d{1,5}$/.test(value)) throw new UsageError(`--${option} must be a whole number`);
    return Number(value);
  };
  let input = null;
  if (values.off !== true) {
    const [host, systemId, password] = [text('smpp-host'), text('system-id'), text('password')];
    if (host === undefined || systemId === undefined || password === undefined) {
      throw new UsageError('--smpp-host, --system-id and --password are required (or --off)');
    }
    const [port, throughput, systemType] = [number('smpp-port'), number('throughput'), text('system-type')];
    const mmsUrl = text('mms-url');
    input = {
      host,
      systemId,
      password,
      tls: values.tls === true,
      ...(port === undefined ? {} : { port }),
      ...(throughput === undefined ? {} : { throughput }),
      ...(systemType === undefined ? {} : { systemType }),
      ...(mmsUrl === undefined ? {} : { mmsUrl }),
    };
  }
  try {
    return await withDatabase(config, async (pool) => {
      const keys = await loadSigningKeys(pool, config.secret);
      // Running engines hear of the change at commit and start, replace or close the carrier's link.
      return inTransaction(pool, async (db) => {
        const set = await setCarrierMessaging(db, keys.carrierSecrets, name, input);
        await announce(db, carrierMessagingChannel, name);
        return set;
      });
    });
  } catch (error) {
    if (error instanceof CarrierInputError) throw new UsageError(error.message);
    throw error;
  }
}

async function runRoles(config: Config, roles: Set<Role>): Promise<void> {
  const service = await startRoles(config, roles);
  let signalled = false;
  const stop = (signal: string) => {
    if (signalled) return;
    signalled = true;
    const force = setTimeout(() => {
      process.stderr.write(`switchboard: in-flight work did not finish within SHUTDOWN_TIMEOUT_MS after ${signal}\n`);
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`switchboard: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

export async function main(args: string[]): Promise<number> {
  const [command] = args;
  try {
    const config = loadConfig();
    switch (command) {
      case 'all':
        await runRoles(config, new Set(['api', 'engine', 'operator']));
        return 0;
      case 'api':
      case 'engine':
      case 'operator':
        await runRoles(config, new Set([command]));
        return 0;
      case 'applications':
      case 'members':
      case 'numbers':
      case 'carriers':
        await admin(config, args);
        return 0;
      case undefined:
      case 'help':
      case '--help':
        process.stdout.write(usage);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError || error instanceof ConfigError) {
      process.stderr.write(`switchboard: ${error.message}\n\n${usage}`);
      return 2;
    }
    if (
      error instanceof ApplicationExists ||
      error instanceof MemberInputError ||
      error instanceof EmbeddedPostgresError
    ) {
      process.stderr.write(`switchboard: ${error.message}\n`);
      return 1;
    }
    if ((error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      process.stderr.write(`switchboard: ${(error as Error).message}\n\n${usage}`);
      return 2;
    }
    process.stderr.write(`switchboard: ${error instanceof Error ? error.stack : String(error)}\n`);
    return 1;
  }
}
