// SPDX-License-Identifier: MIT
/*
 * rp_version(): the version CMake generated into rp_version_gen.h. A function rather
 * than the macro, so that only this file is rebuilt when the version changes.
 */
#include "version.h"
#include "rp_version_gen.h"

const char *rp_version(void)
{
	return RP_VERSION_STRING;
}
