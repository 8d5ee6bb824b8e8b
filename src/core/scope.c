/* scope.c — reference counts under scopes: every returned tensor belongs to the innermost scope. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

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

int ts_scope_depth(void) { return depth + phantom; }

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
    if (depth == 0) {
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
    if (!t || depth == 0) return t;
    if (!scope_push(&frames[depth - 1], t)) {
        ts_release(t);
        tsi_error_set(TS_ERR_OOM, "scope: out of host memory recording a tensor");
        return NULL;
    }
    return t;
}

ts_tensor *ts_keep(ts_tensor *t) {
    if (!t || depth == 0) return t;
    /* in a phantom scope the innermost real frame already stands for the enclosing scope */
    int to = phantom ? depth - 1 : depth - 2;
    scope *s = &frames[depth - 1];
    for (size_t i = s->n; i-- > 0;) {
        if (s->items[i] != t) continue;
        if (to == depth - 1) return t;
        memmove(&s->items[i], &s->items[i + 1], (s->n - i - 1) * sizeof *s->items);
        s->n--;
        if (to >= 0 && !scope_push(&frames[to], t)) {
            ts_release(t);
            tsi_error_set(TS_ERR_OOM, "keep: out of host memory");
            return NULL;
        }
        return t;
    }
    /* not owned by the innermost scope (a parameter, or already kept): take a new reference
     * for the enclosing owner so the caller's view of ownership stays simple */
    ts_retain(t);
    if (to >= 0 && !scope_push(&frames[to], t)) {
        ts_release(t);
        tsi_error_set(TS_ERR_OOM, "keep: out of host memory");
        return NULL;
    }
    return t;
}
