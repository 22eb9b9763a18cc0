// SPDX-License-Identifier: MIT
// Sends the spans a test describes through the official OpenTelemetry JS SDK, as an
// instrumented program would: BasicTracerProvider, BatchSpanProcessor and the OTLP/HTTP
// exporter (protobuf or JSON). Times are given in unix ns as decimal strings and passed
// as HrTime, exact to the ns; spans end in the order the test says, so batches come
// out of start order.
//   node send.js SPEC.json     (SPEC: {url, protocol: proto|json, compression: gzip|none,
//                               service, batch, spans: [{name, parent, kind, start, end,
//                               error, attrs}], end_order: [i...]})
'use strict';
const fs = require('fs');
const api = require('@opentelemetry/api');
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');

async function main() {
	const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
	const mod = spec.protocol === 'proto' ? '@opentelemetry/exporter-trace-otlp-proto'
					      : '@opentelemetry/exporter-trace-otlp-http';
	const { OTLPTraceExporter } = require(mod);
	const exporter = new OTLPTraceExporter({ url: spec.url, compression: spec.compression });
	const provider = new BasicTracerProvider({
		resource: resourceFromAttributes({ 'service.name': spec.service }),
		spanProcessors: [new BatchSpanProcessor(exporter, {
			maxExportBatchSize: spec.batch, scheduledDelayMillis: 20,
			maxQueueSize: 1 << 20 })],
	});
	const tracer = provider.getTracer('ringprof-test');
	const hr = (s) => {
		const t = BigInt(s);
		return [Number(t / 1000000000n), Number(t % 1000000000n)];
	};
	const spans = [];
	for (const s of spec.spans) {
		const ctx = s.parent >= 0 ? api.trace.setSpan(api.ROOT_CONTEXT, spans[s.parent])
					  : api.ROOT_CONTEXT;
		spans.push(tracer.startSpan(s.name, { startTime: hr(s.start), kind: s.kind,
						      attributes: s.attrs || {} }, ctx));
	}
	// A batch's worth at a time, flushed before the next (the exporter takes 30
	// exports in flight at most).
	for (let k = 0; k < spec.end_order.length; k += spec.batch) {
		for (const i of spec.end_order.slice(k, k + spec.batch)) {
			if (spec.spans[i].error)
				spans[i].setStatus({ code: api.SpanStatusCode.ERROR });
			spans[i].end(hr(spec.spans[i].end));
		}
		await provider.forceFlush();
	}
	await provider.shutdown();
}

main().catch((e) => {
	console.error('send.js:', e);
	process.exit(1);
});
