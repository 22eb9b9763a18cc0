/* SPDX-License-Identifier: MIT */
/*
 * The ringprof version: CMake's project() version, one string for every place that
 * names it (`ringprof --version`, the demo, man pages, /metrics build info), so they
 * cannot disagree.
 */
#ifndef RP_VERSION_H
#define RP_VERSION_H

/* rp_version() - "MAJOR.MINOR.PATCH", static storage. */
const char *rp_version(void);

#endif
