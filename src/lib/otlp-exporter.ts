import { OTLPExporterBase, type IOtlpExportDelegate } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import {
  ProtobufTraceSerializer,
  TraceExporterMetricsHelper,
  type IExporterMetricsHelper,
  type IExportTraceServiceResponse,
  type ISerializer,
} from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { encodeTraceRequest } from './otlp-proto.js';
import type { EncodedExport, EncodedSpans } from './otlp-hop-batch.js';

/**
 * The OTLP/HTTP exporter of `http/protobuf` (docs/decisions/0044-hop-records.md): the SDK's own
 * transport — endpoint, headers, timeout, compression and retries from the environment, as its
 * `OTLPTraceExporter` reads them — with the request written by {@link encodeTraceRequest}, and
 * by the SDK's serializer for a batch that one cannot write.
 */
const SERIALIZER: ISerializer<ReadableSpan[], IExportTraceServiceResponse> = {
  serializeRequest: (spans) => encodeTraceRequest(spans) ?? ProtobufTraceSerializer.serializeRequest(spans),
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};

/** The component type the SDK's exporter reports its own metrics under. */
const COMPONENT_TYPE = 'otlp_http_span_exporter';

export function protobufSpanExporter(): SpanExporter {
  return new OTLPExporterBase<ReadableSpan[]>(protobufDelegate(SERIALIZER, TraceExporterMetricsHelper));
}

/** Requests whose body is already written (hop records, src/lib/otlp-hop-batch.ts). */
const WRITTEN: ISerializer<EncodedSpans, IExportTraceServiceResponse> = {
  serializeRequest: (spans) => spans.body,
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};

/**
 * The same transport for requests written as hops were recorded: `send` reports each one
 * answered, whether or not the collector took it (the SDK's delegate logs a failure).
 */
export function protobufEncodedExport(): { send: EncodedExport; shutdown(): Promise<void> } {
  const delegate = protobufDelegate(WRITTEN, { ...TraceExporterMetricsHelper, countItems: (spans) => spans.length });
  return { send: (spans, done) => delegate.export(spans, () => done()), shutdown: () => delegate.shutdown() };
}

function protobufDelegate<T>(
  serializer: ISerializer<T, IExportTraceServiceResponse>,
  metrics: IExporterMetricsHelper<T>,
): IOtlpExportDelegate<T> {
  return createOtlpHttpExportDelegate(
    convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
    serializer,
    COMPONENT_TYPE,
    metrics,
    undefined,
  );
}
