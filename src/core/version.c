/* version.c — the library's version at run time. */
#include "tessera.h"

#define TSI_STR2(x) #x
#define TSI_STR(x)  TSI_STR2(x)

const char *ts_library_version(void) {
    return TSI_STR(TS_VERSION_MAJOR) "." TSI_STR(TS_VERSION_MINOR) "." TSI_STR(TS_VERSION_PATCH);
}
