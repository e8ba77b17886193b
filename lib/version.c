/* version.c: the library's version string. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"

#define PC_STR_(x) #x
#define PC_STR(x) PC_STR_(x)

/* Returns "major.minor.patch" of the header this library was built with. */
const char *paged_version(void)
{
    return PC_STR(PAGED_VERSION_MAJOR) "." PC_STR(PAGED_VERSION_MINOR) "." PC_STR(PAGED_VERSION_PATCH);
}
