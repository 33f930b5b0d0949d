/** The Prometheus text parser the `/metrics` tests read the exposition with (it ships no types). */
declare module 'parse-prometheus-text-format' {
  /** One series: a counter's, gauge's or untyped metric's `value`, or a histogram's buckets, count and sum (numbers as text). */
  export interface Sample {
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface MetricFamily {
    name: string;
    help: string;
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: Sample[];
  }
  /** Throws on a line that is not valid exposition. */
  export default function parsePrometheusTextFormat(text: string): MetricFamily[];
}
