/**
 * The routing plan definition (docs/routing-plans.md, "Definitions and validation") as TypeBox schemas: one schema
 * per step type, the `Step` union and the whole `RoutingPlanDefinition`. They are plain JSON Schema (no transforms,
 * no defaults) because they also describe the API and will generate the Kubernetes CRDs. What JSON Schema cannot say
 * (every referenced step exists, no loops, ids that exist in the workspace, emergency numbers) is checked by
 * `validateDefinition` in `core/routing/validate.ts`, which applies these schemas step by step.
 */
import { type Static, type TSchema, Type } from 'typebox';
import { e164Pattern } from '../ids.ts';
import { maxDefinitionBytes } from './limits.ts';

/** Steps a plan may hold (the bench validates 1,000). */
export const maxSteps = 2000;
export const stepNamePattern = '^[A-Za-z0-9_-]{1,64}$';
/** The keys a menu option may be bound to. */
export const menuOptionKeys = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '#'] as const;
export const aiProviders = ['provider_a', 'provider_b', 'provider_c'] as const;
export const ringModes = ['ring', 'silent', 'muted'] as const;
/** How a target's phones ring (docs/phones.md, "Ring modes"). */
export type RingMode = (typeof ringModes)[number];
export const ringStrategies = ['simultaneous', 'sequential'] as const;

const StepName = (description: string) =>
  Type.String({ pattern: stepNamePattern, description: `${description} (a step name: 1 to 64 of A-Z a-z 0-9 _ -)` });
const Id = (description: string) => Type.String({ minLength: 1, maxLength: 100, description });
const Seconds = (minimum: number, maximum: number, description: string) =>
  Type.Integer({ minimum, maximum, description: `${description}, ${minimum} to ${maximum}` });
const E164 = (description: string) => Type.String({ pattern: e164Pattern, description: `${description} (E.164)` });
const Tts = Type.String({
  minLength: 1,
  maxLength: 4000,
  description: 'Text spoken by text to speech, 1 to 4000 characters',
});
const AudioUrl = Type.String({
  format: 'uri',
  pattern: '^https://',
  maxLength: 2000,
  description: 'An https URL of an audio file, up to 2000 characters',
});
const Audio = <T extends TSchema[]>(description: string, ...more: T) =>
  Type.Union(
    [
      Type.Object({ tts: Tts }, { additionalProperties: false, description: 'Text to speech' }),
      Type.Object({ audioUrl: AudioUrl }, { additionalProperties: false, description: 'An audio file' }),
      ...more,
    ],
    { description },
  );

export const HoursStep = Type.Object(
  {
    type: Type.Literal('hours'),
    scheduleId: Id('The schedule deciding open or closed (an id of the workspace)'),
    open: StepName('Next step while the schedule is open'),
    closed: StepName('Next step while the schedule is closed'),
  },
  { additionalProperties: false, description: 'Branches on a schedule of the workspace' },
);
export type HoursStep = Static<typeof HoursStep>;

const Option = (key: string) => Type.Optional(StepName(`Next step when the caller presses ${key}`));
export const MenuOptions = Type.Object(
  {
    '0': Option('0'),
    '1': Option('1'),
    '2': Option('2'),
    '3': Option('3'),
    '4': Option('4'),
    '5': Option('5'),
    '6': Option('6'),
    '7': Option('7'),
    '8': Option('8'),
    '9': Option('9'),
    '*': Option('*'),
    '#': Option('#'),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'The step each key leads to; keys are 0-9, * and #; at least one',
  },
);

export const MenuStep = Type.Object(
  {
    type: Type.Literal('menu'),
    prompt: Audio('What the menu plays: text to speech or an audio file'),
    options: MenuOptions,
    noInput: StepName('Next step after maxRetries prompts without a valid key'),
    timeoutSecs: Seconds(1, 60, 'Seconds to wait for a key after the prompt'),
    maxRetries: Type.Integer({
      minimum: 0,
      maximum: 10,
      description: 'Times the prompt is repeated after no key or an unbound key, 0 to 10',
    }),
  },
  { additionalProperties: false, description: 'Plays a prompt and collects one key' },
);
export type MenuStep = Static<typeof MenuStep>;

const Mode = Type.Enum([...ringModes], {
  description:
    'ring (the default): the phone rings out loud; silent: the phone shows the call without a sound; muted: the ' +
    'phone rings, and the person answers muted (heard once they unmute)',
});
export const RingTarget = Type.Union(
  [
    Type.Object(
      { memberId: Id('A member of the workspace'), mode: Type.Optional(Mode) },
      { additionalProperties: false, description: 'A member (an agent)' },
    ),
    Type.Object(
      { userId: Id('A user of the workspace'), mode: Type.Optional(Mode) },
      { additionalProperties: false, description: 'A user, on every device' },
    ),
    Type.Object(
      { cell: E164('A phone number dialled out'), mode: Type.Optional(Mode) },
      { additionalProperties: false, description: 'An external phone' },
    ),
  ],
  { description: 'Who is rung: exactly one of memberId, userId or cell' },
);
export type RingTarget = Static<typeof RingTarget>;

export const RingStep = Type.Object(
  {
    type: Type.Literal('ring'),
    targets: Type.Array(RingTarget, { minItems: 1, maxItems: 50, description: 'Who is rung, 1 to 50 targets' }),
    strategy: Type.Enum([...ringStrategies], {
      description: 'simultaneous: every target at once; sequential: one after the other',
    }),
    timeoutSecs: Seconds(5, 300, 'Seconds of ringing before giving up'),
    next: StepName('Next step when nobody answers'),
  },
  { additionalProperties: false, description: 'Rings members, users or phones' },
);
export type RingStep = Static<typeof RingStep>;

/** The priorities a queue step may give its callers. */
export const minQueuePriority = -100;
export const maxQueuePriority = 100;

export const QueueStep = Type.Object(
  {
    type: Type.Literal('queue'),
    queueId: Id('The queue of the workspace the call waits in'),
    maxWaitSecs: Seconds(
      10,
      14400,
      'Seconds a caller may wait (a callback entry too, counted from when the call entered)',
    ),
    overflow: StepName('Next step after maxWaitSecs'),
    offerCallback: Type.Boolean({ description: 'Whether the caller is offered a callback instead of waiting' }),
    priority: Type.Optional(
      Type.Integer({
        minimum: minQueuePriority,
        maximum: maxQueuePriority,
        description:
          `The caller's priority in the queue, ${minQueuePriority} to ${maxQueuePriority} (default 0): a higher ` +
          'priority is offered first, then the longest waiting',
      }),
    ),
  },
  { additionalProperties: false, description: 'Puts the call in a queue' },
);
export type QueueStep = Static<typeof QueueStep>;

/** A prompt as a menu step's, for records that hold one (a queue's hold prompt). */
export const AudioPrompt = Audio('Text to speech or an audio file');
export type AudioPrompt = Static<typeof AudioPrompt>;

export const AiAnswerStep = Type.Object(
  {
    type: Type.Literal('ai_answer'),
    provider: Type.Enum([...aiProviders], { description: "The AI provider; must be the agent's" }),
    agentId: Id('The AI agent of the workspace that answers'),
    onCap: StepName('Next step when the AI usage cap is reached'),
    next: StepName('Next step when the AI agent hands the call back'),
  },
  { additionalProperties: false, description: 'An AI agent answers the call' },
);
export type AiAnswerStep = Static<typeof AiAnswerStep>;

export const ForwardStep = Type.Object(
  {
    type: Type.Literal('forward'),
    to: E164("The external number dialled; never an emergency number, within the workspace's destination policy"),
    timeoutSecs: Seconds(5, 300, 'Seconds of ringing before giving up'),
    next: StepName('Next step when the number does not answer'),
  },
  { additionalProperties: false, description: 'Dials an external number' },
);
export type ForwardStep = Static<typeof ForwardStep>;

export const SplitStep = Type.Object(
  {
    type: Type.Literal('split'),
    percentToA: Type.Integer({ minimum: 0, maximum: 100, description: 'Percentage of calls sent to a, 0 to 100' }),
    a: StepName('Next step for percentToA % of calls'),
    b: StepName('Next step for the other calls'),
  },
  { additionalProperties: false, description: 'Splits calls between two steps at random' },
);
export type SplitStep = Static<typeof SplitStep>;

export const VoicemailStep = Type.Object(
  {
    type: Type.Literal('voicemail'),
    greeting: Audio('The greeting: text to speech, an audio file, or null for the default', Type.Null()),
  },
  { additionalProperties: false, description: 'Takes a voicemail (ends the plan)' },
);
export type VoicemailStep = Static<typeof VoicemailStep>;

export const HangupStep = Type.Object(
  {
    type: Type.Literal('hangup'),
    message: Type.Union([Tts, Type.Null()], {
      description: 'Text spoken before hanging up (1 to 4000 characters), or null',
    }),
  },
  { additionalProperties: false, description: 'Hangs up (ends the plan)' },
);
export type HangupStep = Static<typeof HangupStep>;

/** Each step type's schema, by `type`. */
export const stepSchemas = {
  hours: HoursStep,
  menu: MenuStep,
  ring: RingStep,
  queue: QueueStep,
  ai_answer: AiAnswerStep,
  forward: ForwardStep,
  split: SplitStep,
  voicemail: VoicemailStep,
  hangup: HangupStep,
} as const;
export type StepType = keyof typeof stepSchemas;
export const stepTypes = Object.keys(stepSchemas) as StepType[];
/** Step types that end a plan: every path must reach one. */
export const terminalStepTypes: readonly StepType[] = ['voicemail', 'hangup'];

export const Step = Type.Union(
  [HoursStep, MenuStep, RingStep, QueueStep, AiAnswerStep, ForwardStep, SplitStep, VoicemailStep, HangupStep],
  { description: 'One step; `type` selects the kind' },
);
export type Step = Static<typeof Step>;

export const Recording = Type.Object(
  {
    enabled: Type.Boolean({ description: 'Whether calls are recorded' }),
    disclosure: Type.Boolean({ description: 'Whether callers are told the call is recorded before it is' }),
  },
  { additionalProperties: false, description: 'Call recording' },
);
export type Recording = Static<typeof Recording>;

export const RoutingPlanDefinition = Type.Object(
  {
    entry: StepName('The first step'),
    steps: Type.Record(Type.String({ pattern: stepNamePattern }), Step, {
      additionalProperties: false,
      maxProperties: maxSteps,
      description: `The steps by name, at most ${maxSteps}; every path ends in voicemail or hangup, and no path loops`,
    }),
    recording: Type.Optional(Recording),
  },
  {
    additionalProperties: false,
    description: `A routing plan: where an inbound call goes, step by step; at most ${maxDefinitionBytes} bytes (256 KiB) as JSON`,
  },
);
export type RoutingPlanDefinition = Static<typeof RoutingPlanDefinition>;
