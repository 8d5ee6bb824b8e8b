/* json_file_util.h — a JSON file (a Chrome trace, a memory snapshot) parsed with cJSON for the
 * tests that check what the library wrote. */
#ifndef TS_TEST_JSON_FILE_UTIL_H
#define TS_TEST_JSON_FILE_UTIL_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

/* path's JSON (cJSON_Delete it), NULL when the file cannot be read or is not JSON */
static inline cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[got] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

#endif /* TS_TEST_JSON_FILE_UTIL_H */
