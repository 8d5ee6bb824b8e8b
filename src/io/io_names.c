/* io_names.c — the conventional names (ts_..._new, decision 0025) of the constructors of the
 * TensorBoard event file; the 0.1 names they forward to stay exported until 1.0. */
#include "tessera.h"

ts_event_file *ts_event_file_open(const char *path, double wall_time) {
    return ts_event_file_create(path, wall_time);
}
