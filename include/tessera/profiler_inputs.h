/* tessera/profiler_inputs.h — record_shapes: each op's input shapes and dtypes (PyTorch's "Input
 * Dims" / "Input type" and key_averages(group_by_input_shape=True)). See docs/PROFILING.md. */
#ifndef TESSERA_PROFILER_INPUTS_H
#define TESSERA_PROFILER_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/profiler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_PROF_INPUTS_LEN 192

/* Event i of p (ts_profile_events order): its tensor inputs as JSON arrays, in the order the op
 * takes them: dims "[[8, 3, 16, 16], [4, 3, 3, 3], [4]]" and types "[\"float32\", ...]". "" when
 * the event has none recorded (record_shapes off, not an op, or an op the profiler sees no
 * inputs of: docs/PROFILING.md lists them). A list too long for TS_PROF_INPUTS_LEN ends with the
 * element "...". NULL p or i out of range: "". */
TS_API const char *ts_profile_event_input_dims(const ts_profile *p, size_t i);
TS_API const char *ts_profile_event_input_types(const ts_profile *p, size_t i);

/* One key_averages row grouped by name and input dims. */
typedef struct ts_profile_input_stat {
    ts_profile_stat stat; /* stat.shape: "" */
    char input_dims[TS_PROF_INPUTS_LEN];
} ts_profile_input_stat;
/* ts_profile_key_averages grouped by (kind, name, input dims) as PyTorch's
 * key_averages(group_by_input_shape=True): the number of rows (up to cap written), -1 +
 * TS_ERR_ARG on bad arguments. */
TS_API int64_t ts_profile_key_averages_by_input(const ts_profile *p, ts_profile_input_stat *out,
                                                int64_t cap);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PROFILER_INPUTS_H */
