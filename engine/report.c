// SPDX-License-Identifier: MIT
/*
 * The report's own helpers: anomaly names and freeing. See report.h.
 */
#include <stdlib.h>
#include <string.h>

#include "report.h"

const char *const rp_anomaly_names[RP_ANOM_KIND_COUNT] = {
	[RP_ANOM_END_MISMATCH] = "end_mismatch",
	[RP_ANOM_END_UNMATCHED] = "end_unmatched",
	[RP_ANOM_DEPTH_CAP] = "depth_cap",
	[RP_ANOM_TRACK_CAP] = "track_cap",
	[RP_ANOM_NAME_CAP] = "name_cap",
	[RP_ANOM_CCT_CAP] = "cct_cap",
	[RP_ANOM_CLAMPED] = "clamped",
	[RP_ANOM_BAD_EVENT] = "bad_event",
	[RP_ANOM_OPEN_AT_END] = "open_at_end",
};

void rp_report_free(struct rp_report *r)
{
	if (r == NULL)
		return;
	for (uint32_t i = 0; i < r->n_sources; i++)
		free(r->sources[i].name);
	for (uint32_t i = 0; i < r->n_fns; i++) {
		free(r->fns[i].name);
		free(r->fns[i].category);
		free(r->fns[i].file);
	}
	for (uint32_t i = 0; i < r->n_conc; i++)
		free(r->conc[i].name);
	free(r->conc);
	free(r->sources);
	free(r->fns);
	free(r->edges);
	free(r->nodes);
	free(r->clock);
	memset(r, 0, sizeof(*r));
}
