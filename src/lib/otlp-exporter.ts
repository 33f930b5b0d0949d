import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import {
  ProtobufTraceSerializer,
  TraceExporterMetricsHelper,
  type IExportTraceServiceResponse,
  type ISerializer,
} from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { encodeTraceRequest } from './otlp-proto.js';

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
  const delegate = createOtlpHttpExportDelegate(
    convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
    SERIALIZER,
    COMPONENT_TYPE,
    TraceExporterMetricsHelper,
    undefined,
  );
  return new OTLPExporterBase<ReadableSpan[]>(delegate);
}
