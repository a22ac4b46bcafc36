/**
 * What a routing plan definition refers to in its workspace (validate.ts): the ids it names (`referencesOf`, which
 * the saves record and share-lock), and the issues about them given the workspace's facts (unknown schedules,
 * queues, agents, members and users; destinations the policy refuses).
 */
import { checkDestination } from './destinations.ts';
import { aiProviders, type StepType } from './definition.ts';
import type { PlanReferences, WorkspaceFacts } from './validate.ts';
import { compare, e164Regex, isObject, type Json, knownType, own, type Problem } from './validate-schema.ts';

function stringField(step: Json, field: string): string | null {
  const value = own(step, field);
  return typeof value === 'string' ? value : null;
}

/** The ring targets of a step that are objects, with their index. */
function targetsOf(step: Json): { index: number; target: Json }[] {
  const targets = own(step, 'targets');
  if (!Array.isArray(targets)) return [];
  const found: { index: number; target: Json }[] = [];
  targets.forEach((target: unknown, index) => {
    if (isObject(target)) found.push({ index, target });
  });
  return found;
}

/** The ids of the workspace a definition refers to, each once (sorted); anything unreadable is skipped. */
export function referencesOf(definition: unknown): PlanReferences {
  const found = {
    scheduleIds: new Set<string>(),
    queueIds: new Set<string>(),
    aiAgentIds: new Set<string>(),
    memberIds: new Set<string>(),
    userIds: new Set<string>(),
  };
  const steps = isObject(definition) ? own(definition, 'steps') : undefined;
  if (isObject(steps)) {
    for (const name of Object.keys(steps)) {
      const step = steps[name];
      const type = knownType(step);
      if (type === null || !isObject(step)) continue;
      const add = (into: Set<string>, value: string | null) => {
        if (value !== null) into.add(value);
      };
      if (type === 'hours') add(found.scheduleIds, stringField(step, 'scheduleId'));
      if (type === 'queue') add(found.queueIds, stringField(step, 'queueId'));
      if (type === 'ai_answer') add(found.aiAgentIds, stringField(step, 'agentId'));
      if (type === 'ring') {
        for (const { target } of targetsOf(step)) {
          add(found.memberIds, stringField(target, 'memberId'));
          add(found.userIds, stringField(target, 'userId'));
        }
      }
    }
  }
  const sorted = (set: Set<string>) => [...set].sort(compare);
  return {
    scheduleIds: sorted(found.scheduleIds),
    queueIds: sorted(found.queueIds),
    aiAgentIds: sorted(found.aiAgentIds),
    memberIds: sorted(found.memberIds),
    userIds: sorted(found.userIds),
  };
}

/** Issues about what a step refers to in the workspace. */
export function workspaceProblems(base: string, type: StepType, step: Json, facts: WorkspaceFacts): Problem[] {
  const problems: Problem[] = [];
  const destination = (at: string, number: string) => {
    // A number that is not E.164 at all was reported by the schema already.
    if (!e164Regex.test(number)) return;
    const result = checkDestination(number, facts.destinationPolicy);
    if (result === 'invalid_number') {
      problems.push({ code: result, message: `${at} ${number} has no assigned country calling code` });
    } else if (result === 'emergency_number') {
      problems.push({ code: result, message: `${at} ${number} is an emergency number: plans never dial them` });
    } else if (result === 'destination_blocked') {
      problems.push({ code: result, message: `${at} ${number} is outside the workspace's destination policy` });
    }
  };
  switch (type) {
    case 'hours': {
      const id = stringField(step, 'scheduleId');
      if (id !== null && !facts.schedules.has(id)) {
        problems.push({
          code: 'unknown_schedule',
          message: `${base}.scheduleId ${JSON.stringify(id)} is no schedule of the workspace`,
        });
      }
      break;
    }
    case 'queue': {
      const id = stringField(step, 'queueId');
      if (id !== null && !facts.queues.has(id)) {
        problems.push({
          code: 'unknown_queue',
          message: `${base}.queueId ${JSON.stringify(id)} is no queue of the workspace`,
        });
      }
      break;
    }
    case 'ai_answer': {
      const id = stringField(step, 'agentId');
      const provider = stringField(step, 'provider');
      const agentProvider = id === null ? undefined : facts.aiAgents.get(id);
      if (id !== null && agentProvider === undefined) {
        problems.push({
          code: 'unknown_agent',
          message: `${base}.agentId ${JSON.stringify(id)} is no AI agent of the workspace`,
        });
      } else if (
        agentProvider !== undefined &&
        provider !== null &&
        (aiProviders as readonly string[]).includes(provider) &&
        provider !== agentProvider
      ) {
        problems.push({
          code: 'provider_mismatch',
          message: `${base}.provider is ${JSON.stringify(provider)} but the agent ${JSON.stringify(id)} is of ${JSON.stringify(agentProvider)}`,
        });
      }
      break;
    }
    case 'ring':
      for (const { index, target } of targetsOf(step)) {
        const at = `${base}.targets[${index}]`;
        const memberId = stringField(target, 'memberId');
        const userId = stringField(target, 'userId');
        const cell = stringField(target, 'cell');
        if (memberId !== null && !facts.members.has(memberId)) {
          problems.push({
            code: 'unknown_member',
            message: `${at}.memberId ${JSON.stringify(memberId)} is no member of the workspace`,
          });
        }
        if (userId !== null && !facts.users.has(userId)) {
          problems.push({
            code: 'unknown_user',
            message: `${at}.userId ${JSON.stringify(userId)} is no user of the workspace`,
          });
        }
        if (cell !== null) destination(`${at}.cell`, cell);
      }
      break;
    case 'forward': {
      const to = stringField(step, 'to');
      if (to !== null) destination(`${base}.to`, to);
      break;
    }
    default:
      break;
  }
  return problems;
}
