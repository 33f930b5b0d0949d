import {
  SpanKind,
  trace,
  TraceFlags,
  type AttributeValue,
  type Attributes,
  type SpanContext,
} from '@opentelemetry/api';
import type { ReadableSpan, Sampler } from '@opentelemetry/sdk-trace-base';
import { packageVersion } from './version.js';
import { HopRecords, type OpenHop } from './otel-hops.js';
import { HopBatch } from './otlp-hop-batch.js';

/**
 * OpenTelemetry tracing of a task's hops (issue 32; docs/decisions/0038-tracing.md).
 *
 * Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set when
 * a node starts: only then does {@link startTracing} import the SDK and an OTLP exporter
 * (`http/protobuf` by default, `http/json` by `OTEL_EXPORTER_OTLP_PROTOCOL`). Off, nothing of
 * the SDK is loaded and every hop asks one question, {@link tracingOn}, before it allocates
 * anything for a span.
 *
 * Hops run in different actors, processes and times, so a span is never found in an ambient
 * context: each starts with the task's stored `traceparent` as its remote parent
 * ({@link openSubmit}, {@link recordHop}). The stored one is the task's submit span, so every later hop — fire,
 * release, claim, complete — is its child (and the worker's span the child of the claim's).
 */

/** Where hops are recorded ({@link recordHop}) once {@link startTracing} ran with an endpoint; null: tracing is off. */
let hops: HopRecords | null = null;
/**
 * The provider's sampler, which the submit's records ask too ({@link openSubmit}); null while it
 * is the default (`parentbased_always_on`), whose decision the records make themselves.
 */
let sampler: Sampler | null = null;
/** The SDK's provider and the hop batch, flushed and shut down together. */
let provider: { forceFlush(): Promise<void>; shutdown(): Promise<void> } | null = null;
/** Nodes of this process that started tracing (tests run many): the last to stop shuts it down. */
let users = 0;
let starting: Promise<void> | null = null;

/** Whether this process traces: ask it before building anything for a span. */
export function tracingOn(): boolean {
  return hops !== null;
}

/** The OTLP protocols this node speaks (`OTEL_EXPORTER_OTLP_PROTOCOL`). */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** The endpoint tracing exports to, from the environment; undefined: tracing is off. */
export function otlpEndpoint(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return endpoint === undefined || endpoint === '' ? undefined : endpoint;
}

/**
 * The protocol named by `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`
 * (default `http/protobuf`, as the specification says). `grpc` and anything else are refused
 * with an error that names the variable: the node does not start on a setting it cannot honour.
 */
export function otlpProtocol(env: NodeJS.ProcessEnv = process.env): OtlpProtocol {
  const key = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const value = env[key] || 'http/protobuf';
  if (value === 'http/protobuf' || value === 'http/json') return value;
  throw new Error(`${key} is "${value}": Wheelhouse exports traces over "http/protobuf" or "http/json"`);
}

/**
 * Starts tracing for this process when the environment names an OTLP endpoint: imports the
 * SDK and the exporter of the protocol, and registers a provider (batching spans) as the
 * global one, so that a worker SDK running in the same process traces into it too. Answers
 * whether tracing is on. Each call that answered true is paired with a {@link stopTracing}.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (otlpEndpoint(env) === undefined) return false;
  const protocol = otlpProtocol(env);
  users++;
  starting ??= load(protocol);
  await starting;
  return true;
}

async function load(protocol: OtlpProtocol): Promise<void> {
  const [sdk, resources, semconv, exporter] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
    protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http').then((m) => ({
          spans: new m.OTLPTraceExporter(),
          hops: null,
        }))
      : import('./otlp-exporter.js').then((m) => ({
          spans: m.protobufSpanExporter(),
          hops: m.protobufEncodedExport(),
        })),
  ]);
  const resource = resources.defaultResource().merge(
    resources.resourceFromAttributes({
      [semconv.ATTR_SERVICE_NAME]: process.env.OTEL_SERVICE_NAME || 'wheelhouse',
      [semconv.ATTR_SERVICE_VERSION]: packageVersion(),
    }),
  );
  // The exporter reads the endpoint, headers and timeout from the environment.
  const processor = new sdk.BatchSpanProcessor(exporter.spans);
  const own = samplerFromEnv(sdk, process.env);
  const sdkProvider = new sdk.BasicTracerProvider({ resource, spanProcessors: [processor], sampler: own });
  // The default decides by the parent alone: the submit asks no sampler then (see HopRecords.open).
  sampler = samplerName(process.env) === 'parentbased_always_on' ? null : own;
  trace.setGlobalTracerProvider(sdkProvider);
  const sdkTracer = sdkProvider.getTracer('wheelhouse', packageVersion());
  // The SDK's tracer carries its scope: the hops share that object, so that an export groups
  // them with the tracer's spans under one scope.
  const scope = (sdkTracer as Partial<Pick<ReadableSpan, 'instrumentationScope'>>).instrumentationScope ?? {
    name: 'wheelhouse',
    version: packageVersion(),
  };
  // Over http/protobuf, hops are written as bytes and sent in requests of their own (decision 0045).
  const batch = exporter.hops === null ? null : new HopBatch(resource, scope, exporter.hops.send);
  hops = new HopRecords(batch ?? processor, resource, scope);
  provider = {
    forceFlush: async () => {
      await Promise.all([sdkProvider.forceFlush(), batch?.flush()]);
    },
    shutdown: async () => {
      await Promise.all([sdkProvider.shutdown(), batch?.shutdown().then(() => exporter.hops?.shutdown())]);
    },
  };
}

/** Exports every span ended so far (a node's stop, a test). */
export async function flushTracing(): Promise<void> {
  await provider?.forceFlush();
}

/** Ends one {@link startTracing}: the last exports what is left and turns tracing off. */
export async function stopTracing(): Promise<void> {
  if (users === 0) return;
  users--;
  if (users > 0 || provider === null) return;
  const ending = provider;
  hops = null;
  sampler = null;
  provider = null;
  starting = null;
  trace.disable();
  await ending.shutdown();
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/**
 * Whether `value` is a W3C `traceparent` this node accepts: version `00` exactly as the
 * specification writes it, or a later version (not `ff`) whose extra fields it ignores, with a
 * trace id and a parent id that are not all zeros.
 */
export function isTraceparent(value: string): boolean {
  return spanContextOf(value) !== null;
}

/** The span context a `traceparent` stands for, marked remote; null for one that is not valid. */
export function spanContextOf(traceparent: string): SpanContext | null {
  const m = TRACEPARENT.exec(traceparent);
  if (m === null) return null;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string?];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  return { traceId, spanId, traceFlags: parseInt(flags, 16) & TraceFlags.SAMPLED, isRemote: true };
}

/**
 * Whether a valid `traceparent`'s sampled flag is set. A hop whose task's context is not
 * sampled makes no span at all: under the parent-based sampler its span would record nothing,
 * and skipping it saves making one (ids, the sampler, the attributes) per hop.
 */
export function isSampled(traceparent: string): boolean {
  // `vv-<32>-<16>-ff`: the flags are characters 53–54; the sampled bit is the low bit of the last.
  return (parseInt(traceparent.charAt(54), 16) & TraceFlags.SAMPLED) !== 0;
}

/** The attributes every hop's span carries. */
export interface HopAttributes {
  taskId: string;
  taskType: string;
  /** The attempt the hop belongs to (0 before the first claim). */
  attempt: number;
  partition: number;
}

/**
 * Records a hop that has ended, child of `traceparent` — the task's stored context, which must
 * be sampled ({@link isSampled}) — from `startMs` (default: now) to now. Call only when
 * {@link tracingOn}. An invalid context records nothing.
 *
 * The hops after the submit (fire, release, claim, complete) go this way rather than through
 * the tracer: their parent is known, sampled and remote, and they end where they start, so the
 * finished span is built at once — as bytes of the next OTLP/protobuf request, or as a span for
 * the provider's span processor over http/json — with no sampler, context, attribute checks or
 * span object to fill (docs/decisions/0044-hop-records.md, 0045-hop-bytes.md).
 */
export function recordHop(
  name: string,
  traceparent: string,
  hop: HopAttributes,
  startMs?: number,
  extraKey?: string,
  extraValue?: AttributeValue,
): void {
  (hops as HopRecords).record(name, traceparent, hopAttributes(hop, extraKey, extraValue), startMs);
}

/** {@link recordHop}, answering the hop's own `traceparent` (an invalid context's as it is). */
export function recordHopContext(
  name: string,
  traceparent: string,
  hop: HopAttributes,
  startMs?: number,
  extraKey?: string,
  extraValue?: AttributeValue,
): string {
  return (hops as HopRecords).recordContext(name, traceparent, hopAttributes(hop, extraKey, extraValue), startMs);
}

/**
 * The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, as the SDK would build
 * it when given none (its builder is not exported): the provider gets this one object, so that
 * the submit's records ({@link openSubmit}) and the tracer's spans are sampled by one decision.
 * A name the SDK does not know is its default too, `parentbased_always_on`; a ratio that is
 * missing or outside 0–1 is 1.
 */
export function samplerFromEnv(sdk: SamplerKinds, env: NodeJS.ProcessEnv): Sampler {
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const n = arg ? Number(arg) : Number.NaN;
  const ratio = Number.isFinite(n) && n >= 0 && n <= 1 ? n : 1;
  return SAMPLERS[samplerName(env)]!(sdk, ratio);
}

type SamplerKinds = Pick<
  typeof import('@opentelemetry/sdk-trace-base'),
  'AlwaysOnSampler' | 'AlwaysOffSampler' | 'ParentBasedSampler' | 'TraceIdRatioBasedSampler'
>;

/** The samplers `OTEL_TRACES_SAMPLER` may name, as the SDK builds each. */
const SAMPLERS: Record<string, (sdk: SamplerKinds, ratio: number) => Sampler> = {
  always_on: (sdk) => new sdk.AlwaysOnSampler(),
  always_off: (sdk) => new sdk.AlwaysOffSampler(),
  traceidratio: (sdk, ratio) => new sdk.TraceIdRatioBasedSampler(ratio),
  parentbased_always_on: (sdk) => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
  parentbased_always_off: (sdk) => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() }),
  parentbased_traceidratio: (sdk, ratio) =>
    new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) }),
};

/** The sampler `OTEL_TRACES_SAMPLER` names; the SDK's default, `parentbased_always_on`, for none or one it does not know. */
function samplerName(env: NodeJS.ProcessEnv): string {
  const name = env.OTEL_TRACES_SAMPLER?.trim() ?? '';
  return Object.hasOwn(SAMPLERS, name) ? name : 'parentbased_always_on';
}

/**
 * Opens a task's submit span from now, child of `traceparent` (a new trace when there is
 * none), sampled by the provider's sampler; its `end` records it finished, as a hop's record
 * (see {@link recordHop}). Call only when {@link tracingOn}.
 */
export function openSubmit(name: string, traceparent: string | null | undefined, hop: HopAttributes): OpenHop {
  const parent = traceparent == null ? null : spanContextOf(traceparent);
  return (hops as HopRecords).open(name, SpanKind.PRODUCER, parent, hopAttributes(hop), sampler);
}

/**
 * The attributes every hop's span carries, and `extraKey` when given, in a new object (a
 * literal of one shape, the extra set on it: no merge of a second object). The names are
 * custom: no semantic convention names a scheduler's task.
 */
function hopAttributes(hop: HopAttributes, extraKey?: string, extraValue?: AttributeValue): Attributes {
  const attributes: Attributes = {
    'wheelhouse.task.id': hop.taskId,
    'wheelhouse.task.type': hop.taskType,
    'wheelhouse.task.attempt': hop.attempt,
    'wheelhouse.task.partition': hop.partition,
  };
  if (extraKey !== undefined) attributes[extraKey] = extraValue;
  return attributes;
}

export { SpanKind };
