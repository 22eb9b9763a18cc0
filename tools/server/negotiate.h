/* SPDX-License-Identifier: MIT */
/*
 * Which exposition format a /metrics request asks for: the Prometheus text 0.0.4,
 * OpenMetrics 1.0 text, or delimited protobuf MetricFamily messages (which carry native
 * histograms). A file of its own, with no dependency, so that the fuzzer links it alone.
 */
#ifndef RP_TOOLS_NEGOTIATE_H
#define RP_TOOLS_NEGOTIATE_H

#include <stddef.h>

/* In preference order on a tie of q: the richer format wins. */
enum rp_metrics_format { RP_FMT_TEXT, RP_FMT_OPENMETRICS, RP_FMT_PROTOBUF, RP_FMT_NONE };

/*
 * rp_metrics_format() - the format for a request: ?format=text|openmetrics|protobuf in
 * @path (NUL-terminated) when it says (a scrape config can set it with params:, and
 * Prometheus 2.42 has no other way to ask for text while it speaks protobuf), else the
 * Accept header among the header lines [@head, @head + @len): the media range with the
 * highest q that we serve, protobuf before OpenMetrics before text on a tie; text when
 * nothing matches. Never RP_FMT_NONE.
 */
enum rp_metrics_format rp_metrics_format(const char *path, const char *head, size_t len);

#endif
