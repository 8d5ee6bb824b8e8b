/* scope.c — reference counts under scopes: every returned tensor belongs to the innermost scope. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/profiler_hooks.h"

typedef struct scope {
    ts_tensor **items;
    size_t n, cap;
} scope;

/* A thread's scope stack; frames keep their item arrays between uses so that a training loop's
 * scope_begin/end pair allocates nothing after the first iteration. The first INLINE_FRAMES frames
 * live in thread-local storage, so opening a scope cannot fail at a usual depth. Deeper, when the
 * stack cannot grow, the scope opens as a "phantom": its tensors go to the innermost real frame and
 * die when that one ends (later than asked, but begin/end stay paired and nothing leaks). */
#define INLINE_FRAMES 32
static _Thread_local scope inline_frames[INLINE_FRAMES];
static _Thread_local scope *frames;
static _Thread_local int depth, frames_cap, phantom;
/* Frames below base belong to scopes a ts_scope_suspend hid: the thread behaves as outside any
 * scope until ts_scope_resume (code called back from inside a scope — a Python forward under the
 * ONNX export's trace — that holds its own references). */
static _Thread_local int base;

int ts_scope_depth(void) { return depth - base + phantom; }

ts_scope_suspension ts_scope_suspend(void) {
    const ts_scope_suspension saved = {base, phantom};
    base = depth;
    phantom = 0;
    return saved;
}

void ts_scope_resume(ts_scope_suspension saved) {
    if (depth > base || phantom)
        tsi_error_set(TS_ERR_STATE,
                      "scope_resume: %d scope(s) opened since ts_scope_suspend still open",
                      depth - base + phantom);
    while (depth > base || phantom) ts_scope_end(); /* paired again: nothing leaks */
    base = saved.base;
    phantom = saved.phantom;
}

void ts_scope_begin(void) {
    if (!frames) {
        frames = inline_frames;
        frames_cap = INLINE_FRAMES;
    }
    if (phantom || depth == frames_cap) {
        int cap = frames_cap * 2;
        scope *f = phantom ? NULL : malloc((size_t)cap * sizeof *f);
        if (!f) {
            phantom++;
            return;
        }
        memcpy(f, frames, (size_t)frames_cap * sizeof *f);
        memset(f + frames_cap, 0, (size_t)(cap - frames_cap) * sizeof *f);
        if (frames != inline_frames)
            free(frames);
        else /* their item arrays belong to f now */
            memset(inline_frames, 0, sizeof inline_frames);
        frames = f;
        frames_cap = cap;
    }
    frames[depth++].n = 0;
}

void ts_scope_end(void) {
    if (phantom) {
        phantom--;
        return;
    }
    if (depth == base) {
        tsi_error_set(TS_ERR_STATE, "scope_end: no scope is open");
        return;
    }
    scope *s = &frames[--depth];
    /* release newest first: results die before the inputs they were made from */
    for (size_t i = s->n; i-- > 0;) ts_release(s->items[i]);
    s->n = 0;
    if (depth == 0) {
        /* the outermost scope closed: give the thread's arrays back so that threads which end
         * (loader and data-parallel workers) leave nothing behind; a loop pays a small malloc
         * per iteration for this, which is noise beside a step */
        for (int i = 0; i < frames_cap; i++) {
            free(frames[i].items);
            frames[i] = (scope){0};
        }
        if (frames != inline_frames) free(frames);
        frames = NULL;
        frames_cap = 0;
    }
}

static bool scope_push(scope *s, ts_tensor *t) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        ts_tensor **items = realloc(s->items, cap * sizeof *items);
        if (!items) return false;
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return true;
}

ts_tensor *tsi_own(ts_tensor *t) {
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed)) tsi_prof_own(t);
    if (!t || depth == base) return t;
    if (!scope_push(&frames[depth - 1], t)) {
        ts_release(t);
        tsi_error_set(TS_ERR_OOM, "scope: out of host memory recording a tensor");
        return NULL;
    }
    return t;
}

ts_tensor *ts_keep(ts_tensor *t) {
    if (!t || depth == base) return t;
    /* in a phantom scope the innermost real frame already stands for the enclosing scope */
    int to = phantom ? depth - 1 : depth - 2;
    scope *s = &frames[depth - 1];
    for (size_t i = s->n; i-- > 0;) {
        if (s->items[i] != t) continue;
        if (to == depth - 1) return t;
        memmove(&s->items[i], &s->items[i + 1], (s->n - i - 1) * sizeof *s->items);
        s->n--;
        if (to >= base && !scope_push(&frames[to], t)) {
            ts_release(t);
            tsi_error_set(TS_ERR_OOM, "keep: out of host memory");
            return NULL;
        }
        return t;
    }
    /* not owned by the innermost scope (a parameter, or already kept): take a new reference
     * for the enclosing owner so the caller's view of ownership stays simple */
    ts_retain(t);
    if (to >= base && !scope_push(&frames[to], t)) {
        ts_release(t);
        tsi_error_set(TS_ERR_OOM, "keep: out of host memory");
        return NULL;
    }
    return t;
}
