/* SPDX-License-Identifier: MIT */
/*
 * A merge sort with the comparison inlined, for big arrays (the importers' spans,
 * generated events, steps, times: millions of elements sorted once per trace; the
 * device analysis' records at each report).
 * qsort() calls its comparison through a pointer for each of the n log n compares
 * and moves elements through a generic copy; here both are the element type's own.
 *
 * RP_SORT_DEFINE(name, type, before) defines
 *	static bool name(type *a, size_t n)
 * sorting a[0..n) so that no element is before() its predecessor, stably, with a
 * buffer of n elements from malloc (none for n <= RP_SORT_RUN); false (a untouched)
 * if there is no memory for it or it would take more than a quarter of the
 * machine's, so the caller can fall back to qsort() (which then sorts in place).
 * before(x, y) takes two const type * and is a strict weak order. Runs of 16 are
 * sorted by insertion, then merged pairwise, alternating between a and the buffer.
 */
#ifndef RINGPROF_FORMATS_SORT_H
#define RINGPROF_FORMATS_SORT_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RP_SORT_RUN 16

/* As glibc's qsort decides: a buffer above a quarter of the machine's memory is
 * not taken (qsort then sorts in place). Asked only for big buffers. */
static inline bool rp_sort_may_buffer(size_t bytes)
{
	long pages, page;

	if (bytes < (64u << 20))
		return true;
	pages = sysconf(_SC_PHYS_PAGES);
	page = sysconf(_SC_PAGESIZE);
	return pages <= 0 || page <= 0 || bytes / (size_t)page <= (size_t)pages / 4;
}

#define RP_SORT_DEFINE(name, type, before)                                               \
	static void name##_merge(const type *src, type *dst, size_t lo, size_t mid,         \
				 size_t hi)                                                 \
	{                                                                                   \
		size_t i = lo, j = mid, k = lo;                                             \
                                                                                            \
		while (i < mid && j < hi) /* equal: the left one first (stable) */         \
			dst[k++] = before(&src[j], &src[i]) ? src[j++] : src[i++];          \
		while (i < mid)                                                             \
			dst[k++] = src[i++];                                                \
		while (j < hi)                                                              \
			dst[k++] = src[j++];                                                \
	}                                                                                   \
                                                                                            \
	static bool name(type *a, size_t n)                                                 \
	{                                                                                   \
		type *buf, *src = a, *dst;                                                  \
                                                                                            \
		if (n < 2)                                                                  \
			return true;                                                        \
		buf = n > RP_SORT_RUN && rp_sort_may_buffer(n * sizeof(type))              \
			      ? malloc(n * sizeof(type))                                    \
			      : NULL;                                                       \
		if (buf == NULL && n > RP_SORT_RUN)                                         \
			return false;                                                       \
		for (size_t lo = 0; lo < n; lo += RP_SORT_RUN) {                            \
			size_t hi = lo + RP_SORT_RUN < n ? lo + RP_SORT_RUN : n;            \
			for (size_t i = lo + 1; i < hi; i++) {                              \
				type x = a[i];                                              \
				size_t j = i;                                               \
				for (; j > lo && before(&x, &a[j - 1]); j--)                \
					a[j] = a[j - 1];                                    \
				a[j] = x;                                                   \
			}                                                                   \
		}                                                                           \
		dst = buf;                                                                  \
		for (size_t w = RP_SORT_RUN; w < n; w *= 2) {                               \
			type *t;                                                            \
			for (size_t lo = 0; lo < n; lo += 2 * w) {                          \
				size_t mid = lo + w < n ? lo + w : n;                       \
				size_t hi = lo + 2 * w < n ? lo + 2 * w : n;                \
				name##_merge(src, dst, lo, mid, hi);                        \
			}                                                                   \
			t = src;                                                            \
			src = dst;                                                          \
			dst = t;                                                            \
		}                                                                           \
		if (src != a)                                                               \
			memcpy(a, src, n * sizeof(type));                                   \
		free(buf);                                                                  \
		return true;                                                                \
	}

/*
 * RP_SORT_RUNS_DEFINE(name, sort, type, before), after RP_SORT_DEFINE(sort, type,
 * before), defines
 *	static bool name(type *a, size_t n)
 * with sort()'s contract and result, for arrays made of a few already ordered runs
 * (an importer's per-track output, each track in time order): the maximal runs are
 * merged pairwise, adjacent runs only, so stably, in log2(runs) passes instead of
 * log2(n / RP_SORT_RUN). With more than n / RP_SORT_RUN runs it is sort() itself.
 */
#define RP_SORT_RUNS_DEFINE(name, sort, type, before)                                    \
	static bool name(type *a, size_t n)                                                 \
	{                                                                                   \
		size_t nr = 1, *run;                                                        \
		type *buf, *src = a, *dst, *t;                                              \
                                                                                            \
		for (size_t i = 1; i < n; i++)                                              \
			nr += before(&a[i], &a[i - 1]);                                     \
		if (n < 2 || nr == 1)                                                       \
			return true;                                                        \
		if (nr > n / RP_SORT_RUN || !rp_sort_may_buffer(n * sizeof(type)))         \
			return sort(a, n);                                                  \
		run = malloc((nr + 1) * sizeof(*run));                                      \
		buf = malloc(n * sizeof(type));                                             \
		if (run == NULL || buf == NULL) {                                           \
			free(run);                                                          \
			free(buf);                                                          \
			return false;                                                       \
		}                                                                           \
		nr = 0;                                                                     \
		run[nr++] = 0;                                                              \
		for (size_t i = 1; i < n; i++)                                              \
			if (before(&a[i], &a[i - 1]))                                       \
				run[nr++] = i;                                              \
		run[nr] = n;                                                                \
		dst = buf;                                                                  \
		while (nr > 1) { /* run[k] is written at or before run[i], once read */    \
			size_t k = 0;                                                       \
			for (size_t i = 0; i < nr; i += 2, k++) {                           \
				if (i + 1 < nr)                                             \
					sort##_merge(src, dst, run[i], run[i + 1],          \
						     run[i + 2]);                           \
				else                                                        \
					memcpy(dst + run[i], src + run[i],                  \
					       (n - run[i]) * sizeof(type));               \
				run[k] = run[i];                                            \
			}                                                                   \
			run[k] = n;                                                         \
			nr = k;                                                             \
			t = src;                                                            \
			src = dst;                                                          \
			dst = t;                                                            \
		}                                                                           \
		if (src != a)                                                               \
			memcpy(a, src, n * sizeof(type));                                   \
		free(run);                                                                  \
		free(buf);                                                                  \
		return true;                                                                \
	}

#endif
