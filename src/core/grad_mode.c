/* grad_mode.c — the thread-local no-grad depth (ts_no_grad_begin/end). */
#include "core/grad_mode.h"
#include "core/internal.h"

static _Thread_local int no_grad_depth;

bool tsi_grad_mode(void) { return no_grad_depth == 0; }
bool ts_grad_enabled(void) { return no_grad_depth == 0; }
void ts_no_grad_begin(void) { no_grad_depth++; }
void ts_no_grad_end(void) {
    if (no_grad_depth == 0) {
        tsi_error_set(TS_ERR_STATE, "no_grad_end: no no-grad region is open");
        return;
    }
    no_grad_depth--;
}

int tsi_grad_depth_swap(int depth) {
    int old = no_grad_depth;
    no_grad_depth = depth;
    return old;
}
