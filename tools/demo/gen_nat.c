// SPDX-License-Identifier: MIT
/*
 * gen_nat: writes an agent-toolkit trace (all_requests_profiler_traces.json layout,
 * as tests/data/nat/small.json) of a given size, for benchmarks: requests
 * that overlap in time, each a WORKFLOW around a FUNCTION agent that alternates LLM
 * and TOOL calls, some tools calling an LLM, every step with the toolkit's payload
 * fields (framework, tags, metadata, data, usage_info). With --malformed P, about
 * P percent of the calls lose their END, get an END of a UUID never started, or
 * reuse the previous call's UUID.
 *
 * usage: gen_nat STEPS [--seed N] [--malformed P] > trace.json
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 42;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33) % n;
}

static unsigned long step_count;
static int malformed;

static void step(bool *first, int req, const char *type, double ts, const char *name,
		 const char *fname, const char *uuid)
{
	printf("%s\n   {\"parent_id\": \"r%d\", \"function_ancestry\": {\"function_id\": \"f%d\", "
	       "\"function_name\": \"%s\", \"parent_id\": \"root\", \"parent_name\": "
	       "\"<workflow>\"}, \"payload\": {\"event_type\": \"%s\", \"event_timestamp\": %.7f, "
	       "\"span_event_timestamp\": null, \"framework\": \"langchain\", \"name\": \"%s\", "
	       "\"tags\": null, \"metadata\": null, \"data\": {\"input\": \"q%d.%lu\", \"output\": "
	       "null}, \"usage_info\": null, \"UUID\": \"%s\"}}",
	       *first ? "" : ",", req, req, fname, type, ts, name, req, step_count, uuid);
	*first = false;
	step_count++;
}

/* One call and, for tools, maybe an LLM inside; returns its end time. */
static double call(bool *first, int req, unsigned *seq, const char *kind, const char *name,
		   double t, double len, int depth)
{
	char uuid[48], st[32], en[32];
	int m = malformed && (int)rnd(100) < malformed ? (int)rnd(3) + 1 : 0;

	snprintf(uuid, sizeof(uuid), "r%d-u%u", req, m == 3 && *seq ? *seq - 1 : *seq);
	(*seq)++;
	snprintf(st, sizeof(st), "%s_START", kind);
	snprintf(en, sizeof(en), "%s_END", kind);
	step(first, req, st, t, name, "react_agent", uuid);
	if (depth == 0 && rnd(3) == 0)
		call(first, req, seq, "LLM", "llama-3.1-8b", t + len * 0.05, len * 0.9, 1);
	if (m != 1)
		step(first, req, en, t + len, name, "react_agent", uuid);
	if (m == 2)
		step(first, req, en, t + len, name, "react_agent", "never-started");
	return t + len;
}

static const char usage[] =
	"usage: gen_nat STEPS [--seed N] [--malformed PERCENT] > trace.json\n"
	"Writes an agent-toolkit trace (all_requests_profiler_traces.json) of STEPS steps\n"
	"on stdout; --malformed P (0 to 100): about P% of the steps are broken.\n";

/* A whole decimal number: digits only. */
static bool number(const char *s, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return *s >= '0' && *s <= '9' && *end == '\0' && errno == 0;
}

static int bad(const char *what, const char *arg)
{
	fprintf(stderr, "gen_nat: %s %s: not valid (try gen_nat --help)\n", what, arg);
	return 2;
}

int main(int argc, char **argv)
{
	static const char *const llms[] = { "llama-3.1-8b", "llama-3.1-70b", "nemotron-49b" };
	static const char *const tools[] = { "retriever", "calculator", "sql_query", "web_search" };
	unsigned long long target;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		}
	if (argc < 2 || !number(argv[1], &target))
		return bad("STEPS", argc < 2 ? "" : argv[1]);
	for (int i = 2; i < argc; i += 2) {
		unsigned long long v;

		if (i + 1 == argc || !number(argv[i + 1], &v))
			return bad(argv[i], i + 1 < argc ? argv[i + 1] : "");
		if (strcmp(argv[i], "--seed") == 0)
			rng = v;
		else if (strcmp(argv[i], "--malformed") == 0 && v <= 100)
			malformed = (int)v;
		else
			return bad(argv[i], argv[i + 1]);
	}
	fputs("[", stdout);
	for (int req = 0; step_count < target; req++) {
		bool first = true;
		unsigned seq = 0;
		double t = 1750000000.0 + req * 0.35 + rnd(1000) / 1000.0;
		char uuid[48];

		printf("%s\n {\"request_number\": %d, \"intermediate_steps\": [", req ? "," : "",
		       req);
		snprintf(uuid, sizeof(uuid), "r%d-u%u", req, seq++);
		step(&first, req, "WORKFLOW_START", t, "<workflow>", "<workflow>", uuid);
		double t0 = t + 0.002, end;
		char agent[48];
		snprintf(agent, sizeof(agent), "r%d-u%u", req, seq++);
		step(&first, req, "FUNCTION_START", t0, "react_agent", "react_agent", agent);
		end = t0 + 0.001;
		for (int k = 2 + (int)rnd(30); k > 0 && step_count < target; k--) {
			end = call(&first, req, &seq, "LLM", llms[rnd(3)], end + 0.001 * rnd(20),
				   0.01 + rnd(2000) / 1000.0, 0);
			end = call(&first, req, &seq, "TOOL", tools[rnd(4)], end + 0.001 * rnd(5),
				   0.001 + rnd(500) / 1000.0, 0);
		}
		step(&first, req, "FUNCTION_END", end + 0.001, "react_agent", "react_agent", agent);
		step(&first, req, "WORKFLOW_END", end + 0.002, "<workflow>", "<workflow>", uuid);
		fputs("]}", stdout);
	}
	fputs("\n]\n", stdout);
	fprintf(stderr, "gen_nat: %lu steps\n", step_count);
	return 0;
}
