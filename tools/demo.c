// SPDX-License-Identifier: MIT
/* Stub: being written. */
#include <errno.h>
int main(void) { return 0; }
