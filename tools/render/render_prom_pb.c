// SPDX-License-Identifier: MIT
/*
 * The other two exposition formats /metrics negotiates (tools/server/serve.c), both made
 * from the text rp_render_prom() wrote (plus the server's own lines), so every format
 * carries the same families, samples and values, and a metric added to the text needs
 * no second writer:
 *
 * - OpenMetrics 1.0 text (application/openmetrics-text): a counter family is named
 *   without its _total suffix in # HELP and # TYPE, comments other than those are left
 *   out, and the exposition ends with "# EOF".
 * - Prometheus protobuf (application/vnd.google.protobuf; proto=io.prometheus.client.
 *   MetricFamily; encoding=delimited): each family a varint length and a MetricFamily of
 *   io/prometheus/client/metrics.proto (field numbers below, from the .proto Debian
 *   ships in golang-github-prometheus-client-model-dev). Written with the hand-written
 *   writer of protobuf.h rather than protobuf-c: the messages are write-only, the writer
 *   already serves pprof, and it needs no generated code, no .proto in the tree and no
 *   new dependency (the encoding is checked by Prometheus itself in test_prom_fleet).
 *
 * The protobuf form is the one that carries *native histograms*: the duration histogram
 * ringprof_span_duration_seconds keeps its classic buckets (for scrapers that want
 * them) and gains, from the name's all-time sketch, the native fields: schema, zero
 * bucket, positive spans and deltas. The schema is the finest whose bucket ratio
 * 2^(2^-schema) is no narrower than the sketch's (gamma = (1 + alpha) / (1 - alpha)),
 * schema 5 (ratio 1.0219) at the default alpha = 1% (gamma 1.0202): every native bucket
 * then holds one or two sketch buckets, so no comb of empty buckets appears and the
 * relative error stays that of the sketch (a native bucket is 2.2% wide: +-1.1%, plus
 * the sketch bucket's own 1% blur at a boundary). Each sketch bucket goes whole to the
 * native bucket (base^(i-1), base^i] its value (harmonic mean of its bounds) falls in;
 * the sketch's zero bucket (durations of 0 ns) is the zero bucket, with client_golang's
 * default threshold 2^-128. A name whose sketch misses calls (no sketch, or a count
 * that differs from its calls) gets no native fields, its classic buckets only: a
 * native histogram's count is the sum of its buckets, and a wrong count would be worse
 * than none.
 *
 * The input is trusted (the engine's own text), yet the parser checks every step and
 * fails with -EINVAL on a line it does not understand rather than guess.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "protobuf.h"
#include "render.h"
#include "render_priv.h"
#include "sketch.h"

/* metrics.proto field numbers. */
enum {
	MF_NAME = 1, MF_HELP = 2, MF_TYPE = 3, MF_METRIC = 4,
	M_LABEL = 1, M_GAUGE = 2, M_COUNTER = 3, M_SUMMARY = 4, M_UNTYPED = 5, M_HISTOGRAM = 7,
	LP_NAME = 1, LP_VALUE = 2,
	VALUE = 1, /* Gauge.value, Counter.value, Untyped.value */
	S_COUNT = 1, S_SUM = 2, S_QUANTILE = 3, Q_QUANTILE = 1, Q_VALUE = 2,
	H_COUNT = 1, H_SUM = 2, H_BUCKET = 3, B_CUMULATIVE = 1, B_UPPER = 2,
	H_SCHEMA = 5, H_ZERO_THRESHOLD = 6, H_ZERO_COUNT = 7, H_POS_SPAN = 12,
	H_POS_DELTA = 13, SPAN_OFFSET = 1, SPAN_LENGTH = 2,
};

/* MetricType. */
enum { T_COUNTER = 0, T_GAUGE = 1, T_SUMMARY = 2, T_UNTYPED = 3, T_HISTOGRAM = 4 };

#define MAX_LABELS 8
#define ZERO_THRESHOLD 2.938735877055719e-39 /* 2^-128, client_golang's default */

/* --- OpenMetrics --- */

/* The bytes of line @s (without its '\n') and where the next one starts. */
static size_t line_len(const char *s, const char *end)
{
	const char *nl = memchr(s, '\n', (size_t)(end - s));

	return nl ? (size_t)(nl - s) : (size_t)(end - s);
}

/* "# HELP x_total h" -> "# HELP x h" when @strip: the name ends at the first space. */
static void om_meta(FILE *out, const char *s, size_t n, bool strip)
{
	const char *name = s + 7, *sp = memchr(name, ' ', n - 7);
	size_t nn = sp ? (size_t)(sp - name) : n - 7;

	if (strip && nn > 6 && memcmp(name + nn - 6, "_total", 6) == 0) {
		fwrite(s, 1, 7 + nn - 6, out);
		fwrite(name + nn, 1, n - 7 - nn, out);
	} else {
		fwrite(s, 1, n, out);
	}
	fputc('\n', out);
}

int rp_render_prom_openmetrics(const char *text, size_t len, FILE *out)
{
	const char *s = text, *end = text + len, *help = NULL;
	size_t help_n = 0;

	for (; s < end; s += line_len(s, end) + 1) {
		size_t n = line_len(s, end);

		if (n >= 7 && memcmp(s, "# HELP ", 7) == 0) {
			help = s; /* written with its TYPE, which says whether to strip */
			help_n = n;
		} else if (n >= 7 && memcmp(s, "# TYPE ", 7) == 0) {
			bool counter = n > 8 && memcmp(s + n - 8, " counter", 8) == 0;

			if (help != NULL)
				om_meta(out, help, help_n, counter);
			om_meta(out, s, n, counter);
			help = NULL;
		} else if (n > 0 && s[0] != '#') {
			fwrite(s, 1, n, out);
			fputc('\n', out);
		}
	}
	fputs("# EOF\n", out);
	return ferror(out) ? -EIO : 0;
}

/* --- the text, parsed --- */

struct label {
	char name[32];
	char *value; /* unescaped, owned */
};

struct sample {
	char name[160];
	struct label l[MAX_LABELS];
	unsigned n;
	const char *value; /* the value's text, up to the end of the line */
};

static void sample_free(struct sample *x)
{
	for (unsigned i = 0; i < x->n; i++)
		free(x->l[i].value);
	x->n = 0;
}

/* A label value from after its opening quote; *@p is left after the closing quote. */
static char *unquote(const char **p, const char *end)
{
	char *v = malloc((size_t)(end - *p) + 1), *o = v;
	const char *s = *p;

	if (v == NULL)
		return NULL;
	for (; s < end && *s != '"'; s++) {
		if (*s == '\\' && s + 1 < end) {
			s++;
			*o++ = *s == 'n' ? '\n' : *s;
		} else {
			*o++ = *s;
		}
	}
	if (s >= end) {
		free(v);
		return NULL;
	}
	*o = '\0';
	*p = s + 1;
	return v;
}

/* name{a="x",b="y"} value */
static int parse_sample(const char *s, size_t n, struct sample *x)
{
	const char *end = s + n, *p = s;
	size_t k = strcspn(s, "{ ");

	x->n = 0;
	if (k == 0 || k >= sizeof(x->name) || k >= n)
		return -EINVAL;
	memcpy(x->name, s, k);
	x->name[k] = '\0';
	p = s + k;
	if (*p == '{') {
		for (p++; p < end && *p != '}';) {
			const char *eq = memchr(p, '=', (size_t)(end - p));
			struct label *l = &x->l[x->n];

			if (eq == NULL || x->n == MAX_LABELS || (size_t)(eq - p) >= sizeof(l->name) ||
			    eq + 1 >= end || eq[1] != '"')
				return -EINVAL;
			memcpy(l->name, p, (size_t)(eq - p));
			l->name[eq - p] = '\0';
			p = eq + 2;
			l->value = unquote(&p, end);
			if (l->value == NULL)
				return -ENOMEM;
			x->n++;
			if (p < end && *p == ',')
				p++;
		}
		if (p >= end)
			return -EINVAL;
		p++;
	}
	if (p >= end || *p != ' ')
		return -EINVAL;
	x->value = p + 1;
	return 0;
}

static const char *label_get(const struct sample *x, const char *name)
{
	for (unsigned i = 0; i < x->n; i++)
		if (strcmp(x->l[i].name, name) == 0)
			return x->l[i].value;
	return NULL;
}

/* --- native histograms --- */

/* The finest schema (-4 .. 8) whose bucket ratio is no narrower than gamma. */
static int native_schema(double alpha)
{
	double gamma = (1 + alpha) / (1 - alpha);
	int s;

	for (s = 8; s > -4; s--)
		if (exp2(exp2(-s)) >= gamma)
			break;
	return s;
}

/* The fn with these labels (name, category, optional location "file:line"); NULL. */
static const struct rp_report_fn *find_fn(const struct rp_report *r, const struct sample *x)
{
	const char *name = label_get(x, "name"), *cat = label_get(x, "category");
	const char *loc = label_get(x, "location");

	for (uint32_t i = 0; name != NULL && cat != NULL && i < r->n_fns; i++) {
		const struct rp_report_fn *f = &r->fns[i];
		char buf[64];

		if (strcmp(f->name ? f->name : "", name) != 0 ||
		    strcmp(f->category ? f->category : "", cat) != 0)
			continue;
		if (loc != NULL) {
			const char *colon = strrchr(loc, ':');

			snprintf(buf, sizeof(buf), ":%" PRIu32, f->line);
			if (colon == NULL || strcmp(colon, buf) != 0 ||
			    strncmp(loc, f->file ? f->file : "", (size_t)(colon - loc)) != 0 ||
			    strlen(f->file ? f->file : "") != (size_t)(colon - loc))
				continue;
		}
		return f;
	}
	return NULL;
}

static void put_span(struct rp_pb *h, struct rp_pb *span, int32_t offset, size_t len)
{
	rp_pb_reset(span);
	rp_pb_sint(span, SPAN_OFFSET, offset);
	rp_pb_uint(span, SPAN_LENGTH, len);
	rp_pb_message(h, H_POS_SPAN, span);
}

/* Appends @f's native fields to the Histogram message @h; nothing when it has none. */
static int native(const struct rp_report_fn *f, struct rp_pb *h)
{
	const struct rp_report_sketch *k = &f->dur;
	int32_t *ix, prev_end = 0;
	struct rp_sketch tmp;
	struct rp_pb span;
	uint64_t *cnt;
	size_t m = 0, a = 0;
	double scale;
	int schema;

	if (k->alpha <= 0 || k->alpha >= 1 || k->count != f->calls || k->count == 0 ||
	    k->n_neg || k->dropped || k->collapsed_pos)
		return 0;
	if (rp_sketch_init(&tmp, k->alpha) != 0)
		return -ENOMEM;
	ix = malloc((k->n_pos + 1) * sizeof(*ix));
	cnt = malloc((k->n_pos + 1) * sizeof(*cnt));
	if (ix == NULL || cnt == NULL) {
		free(ix);
		free(cnt);
		rp_sketch_fini(&tmp);
		return -ENOMEM;
	}
	schema = native_schema(k->alpha);
	scale = exp2(schema);
	/* Sketch indices rise with the value, so native indices never fall: one pass. The
	 * value in seconds; native bucket j holds (base^(j-1), base^j]. */
	for (uint32_t i = 0; i < k->n_pos; i++) {
		double v = rp_sketch_bucket_value(&tmp, k->pos_lo + (int32_t)i) * 1e-9;
		int32_t j;

		if (k->pos[i] == 0)
			continue;
		j = (int32_t)ceil(log2(v) * scale);
		if (m > 0 && ix[m - 1] == j) {
			cnt[m - 1] += k->pos[i];
		} else {
			ix[m] = j;
			cnt[m++] = k->pos[i];
		}
	}
	rp_sketch_fini(&tmp);
	rp_pb_init(&span);
	rp_pb_sint(h, H_SCHEMA, schema);
	rp_pb_double(h, H_ZERO_THRESHOLD, ZERO_THRESHOLD);
	rp_pb_uint(h, H_ZERO_COUNT, k->zero);
	/* Spans of consecutive indices: the first offset absolute, the next ones the gap
	 * after the previous span. */
	for (size_t b = 1; b <= m; b++)
		if (b == m || ix[b] != ix[b - 1] + 1) {
			put_span(h, &span, a == 0 ? ix[a] : ix[a] - prev_end, b - a);
			prev_end = ix[b - 1] + 1;
			a = b;
		}
	rp_pb_free(&span);
	/* Deltas: the first count, then each minus the one before (zigzag, sint64). */
	for (size_t i = m; i-- > 1;)
		cnt[i] = rp_pb_zigzag((int64_t)(cnt[i] - cnt[i - 1]));
	if (m > 0)
		cnt[0] = rp_pb_zigzag((int64_t)cnt[0]);
	rp_pb_packed(h, H_POS_DELTA, cnt, m);
	free(ix);
	free(cnt);
	return 0;
}

/* --- protobuf --- */

struct pbw {
	const struct rp_report *r;
	FILE *out;
	struct rp_pb fam, met, sub, tmp;
	char fam_name[160];
	char *help;
	int type;
	bool in_metric, any_metric;
	char key[1024]; /* the open metric's labels (le and quantile aside) */
	const struct rp_report_fn *fn; /* the open histogram's fn (native fields) */
	uint64_t count;
	double sum;
};

static void put_labels(struct rp_pb *met, struct rp_pb *tmp, const struct sample *x)
{
	for (unsigned i = 0; i < x->n; i++) {
		if (strcmp(x->l[i].name, "le") == 0 || strcmp(x->l[i].name, "quantile") == 0)
			continue;
		rp_pb_reset(tmp);
		rp_pb_string(tmp, LP_NAME, x->l[i].name);
		rp_pb_string(tmp, LP_VALUE, x->l[i].value);
		rp_pb_message(met, M_LABEL, tmp);
	}
}

static void label_key(const struct sample *x, char *key, size_t size)
{
	size_t o = 0;

	key[0] = '\0';
	for (unsigned i = 0; i < x->n && o < size; i++)
		if (strcmp(x->l[i].name, "le") != 0 && strcmp(x->l[i].name, "quantile") != 0)
			o += (size_t)snprintf(key + o, size - o, "%s\x1f%s\x1e", x->l[i].name,
					      x->l[i].value);
}

static int metric_end(struct pbw *w)
{
	int err = 0;

	if (!w->in_metric)
		return 0;
	if (w->type == T_HISTOGRAM || w->type == T_SUMMARY) {
		rp_pb_uint(&w->sub, w->type == T_HISTOGRAM ? H_COUNT : S_COUNT, w->count);
		rp_pb_double(&w->sub, w->type == T_HISTOGRAM ? H_SUM : S_SUM, w->sum);
		if (w->fn != NULL)
			err = native(w->fn, &w->sub);
		rp_pb_message(&w->met, w->type == T_HISTOGRAM ? M_HISTOGRAM : M_SUMMARY, &w->sub);
	}
	rp_pb_message(&w->fam, MF_METRIC, &w->met);
	w->in_metric = false;
	w->any_metric = true;
	return err;
}

static void family_end(struct pbw *w)
{
	if (w->any_metric) {
		rp_pb_reset(&w->tmp);
		rp_pb_string(&w->tmp, MF_NAME, w->fam_name);
		if (w->help != NULL)
			rp_pb_string(&w->tmp, MF_HELP, w->help);
		rp_pb_uint(&w->tmp, MF_TYPE, (uint64_t)w->type);
		if (!rp_pb_error(&w->tmp) && !rp_pb_error(&w->fam)) {
			struct rp_pb len;

			rp_pb_init(&len);
			rp_pb_varint(&len, w->tmp.len + w->fam.len);
			if (!rp_pb_error(&len)) {
				fwrite(len.buf, 1, len.len, w->out);
				fwrite(w->tmp.buf, 1, w->tmp.len, w->out);
				fwrite(w->fam.buf, 1, w->fam.len, w->out);
			}
			rp_pb_free(&len);
		}
	}
	rp_pb_reset(&w->fam);
	w->any_metric = false;
}

/* The HELP text, unescaped (\\ and \n). */
static char *help_text(const char *s, size_t n)
{
	char *v = malloc(n + 1), *o = v;

	for (size_t i = 0; v != NULL && i < n; i++) {
		if (s[i] == '\\' && i + 1 < n) {
			i++;
			*o++ = s[i] == 'n' ? '\n' : s[i];
		} else {
			*o++ = s[i];
		}
	}
	if (v != NULL)
		*o = '\0';
	return v;
}

static int meta_line(struct pbw *w, const char *s, size_t n)
{
	const char *name = s + 7, *sp = memchr(name, ' ', n - 7);
	size_t nn = sp ? (size_t)(sp - name) : n - 7;
	int err = metric_end(w);

	if (sp == NULL || nn >= sizeof(w->fam_name))
		return -EINVAL;
	if (s[2] == 'H') {
		family_end(w);
		memcpy(w->fam_name, name, nn);
		w->fam_name[nn] = '\0';
		free(w->help);
		w->help = help_text(sp + 1, n - 7 - nn - 1);
		w->type = T_UNTYPED;
		return w->help ? err : -ENOMEM;
	}
	if (strlen(w->fam_name) != nn || memcmp(w->fam_name, name, nn) != 0) {
		family_end(w); /* a TYPE without HELP */
		memcpy(w->fam_name, name, nn);
		w->fam_name[nn] = '\0';
		free(w->help);
		w->help = NULL;
	}
	sp++;
	w->type = strncmp(sp, "counter", 7) == 0     ? T_COUNTER
		  : strncmp(sp, "gauge", 5) == 0     ? T_GAUGE
		  : strncmp(sp, "summary", 7) == 0   ? T_SUMMARY
		  : strncmp(sp, "histogram", 9) == 0 ? T_HISTOGRAM
						     : T_UNTYPED;
	return err;
}

/* @x's name minus the family's: "", "_bucket", "_sum", "_count"; NULL: another family. */
static const char *suffix(const struct pbw *w, const struct sample *x)
{
	size_t n = strlen(w->fam_name);

	return strncmp(x->name, w->fam_name, n) == 0 ? x->name + n : NULL;
}

static int sample_line(struct pbw *w, const struct sample *x)
{
	const char *sfx = suffix(w, x), *le = label_get(x, "le"), *q = label_get(x, "quantile");
	char key[sizeof(w->key)];
	double v = strtod(x->value, NULL);
	int err = 0;

	if (sfx == NULL)
		return -EINVAL;
	label_key(x, key, sizeof(key));
	if (w->in_metric && strcmp(key, w->key) != 0)
		err = metric_end(w);
	if (!w->in_metric) {
		rp_pb_reset(&w->met);
		rp_pb_reset(&w->sub);
		put_labels(&w->met, &w->tmp, x);
		memcpy(w->key, key, sizeof(key));
		w->in_metric = true;
		w->count = 0;
		w->sum = 0;
		w->fn = w->type == T_HISTOGRAM && strcmp(w->fam_name, "ringprof_span_duration_seconds") == 0
				? find_fn(w->r, x)
				: NULL;
	}
	if (w->type == T_HISTOGRAM || w->type == T_SUMMARY) {
		if (strcmp(sfx, "_sum") == 0) {
			w->sum = v;
		} else if (strcmp(sfx, "_count") == 0) {
			w->count = strtoull(x->value, NULL, 10);
		} else if (w->type == T_HISTOGRAM && strcmp(sfx, "_bucket") == 0 && le != NULL) {
			if (strcmp(le, "+Inf") != 0) { /* +Inf is the count, implied */
				rp_pb_reset(&w->tmp);
				rp_pb_uint(&w->tmp, B_CUMULATIVE, strtoull(x->value, NULL, 10));
				rp_pb_double(&w->tmp, B_UPPER, strtod(le, NULL));
				rp_pb_message(&w->sub, H_BUCKET, &w->tmp);
			}
		} else if (w->type == T_SUMMARY && sfx[0] == '\0' && q != NULL) {
			rp_pb_reset(&w->tmp);
			rp_pb_double(&w->tmp, Q_QUANTILE, strtod(q, NULL));
			rp_pb_double(&w->tmp, Q_VALUE, v);
			rp_pb_message(&w->sub, S_QUANTILE, &w->tmp);
		} else {
			return -EINVAL;
		}
		return err;
	}
	if (sfx[0] != '\0')
		return -EINVAL;
	rp_pb_reset(&w->tmp);
	rp_pb_double(&w->tmp, VALUE, v);
	rp_pb_message(&w->met,
		      w->type == T_COUNTER ? M_COUNTER : w->type == T_GAUGE ? M_GAUGE : M_UNTYPED,
		      &w->tmp);
	return err ? err : metric_end(w);
}

int rp_render_prom_protobuf(const struct rp_report *r, const char *text, size_t len, FILE *out)
{
	struct pbw w = { .r = r, .out = out, .type = T_UNTYPED };
	const char *s = text, *end = text + len;
	struct sample x = { .n = 0 };
	int err = 0;

	rp_pb_init(&w.fam);
	rp_pb_init(&w.met);
	rp_pb_init(&w.sub);
	rp_pb_init(&w.tmp);
	for (; err == 0 && s < end; s += line_len(s, end) + 1) {
		size_t n = line_len(s, end);

		if (n >= 7 && (memcmp(s, "# HELP ", 7) == 0 || memcmp(s, "# TYPE ", 7) == 0)) {
			err = meta_line(&w, s, n);
		} else if (n > 0 && s[0] != '#') {
			err = parse_sample(s, n, &x);
			if (err == 0)
				err = sample_line(&w, &x);
			sample_free(&x);
		}
	}
	if (err == 0)
		err = metric_end(&w);
	if (err == 0)
		family_end(&w);
	if (err == 0)
		err = rp_pb_error(&w.fam) ? rp_pb_error(&w.fam)
		      : rp_pb_error(&w.met) ? rp_pb_error(&w.met)
		      : rp_pb_error(&w.sub) ? rp_pb_error(&w.sub)
					    : rp_pb_error(&w.tmp);
	rp_pb_free(&w.fam);
	rp_pb_free(&w.met);
	rp_pb_free(&w.sub);
	rp_pb_free(&w.tmp);
	free(w.help);
	if (err == 0 && ferror(out))
		err = -EIO;
	return err;
}
