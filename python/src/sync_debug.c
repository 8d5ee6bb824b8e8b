/* sync_debug.c — tessera.cuda's set_sync_debug_mode (warnings through Python's warnings module at
 * the user's line) and tessera.cuda.memory's snapshot primitives (tessera/sync_debug.h). */
#include <stdlib.h>
#include <string.h>
#include <tessera/sync_debug.h>

#include "tsp.h"

static char *pkg_dir; /* frames whose file lies under it belong to tessera, not the user */

/* How many frames up the first one outside the tessera package is (warnings' stacklevel). */
static int user_stacklevel(void) {
    int level = 1;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(f);
    while (f && pkg_dir) {
        PyCodeObject *code = PyFrame_GetCode(f);
        PyObject *name = PyObject_GetAttrString((PyObject *)code, "co_filename");
        const char *file = name ? PyUnicode_AsUTF8(name) : NULL;
        bool ours = file && strncmp(file, pkg_dir, strlen(pkg_dir)) == 0;
        Py_XDECREF(name);
        Py_DECREF(code);
        if (!file) PyErr_Clear();
        if (!ours) break;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
        level++;
    }
    Py_XDECREF(f);
    return level;
}

/* Runs in the thread that synchronised, with or without the GIL: error mode raises from the op's
 * own failure, warn mode warns (Python's registry keeps one warning per line). */
static void handler(void *ctx, const ts_sync_event *ev) {
    (void)ctx;
    if (ev->error) return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    if (PyErr_WarnFormat(PyExc_UserWarning, user_stacklevel(),
                         "called a synchronizing operation (%s on %s)", ev->op,
                         ts_device_str(ev->device)) < 0)
        PyErr_WriteUnraisable(NULL); /* a warnings filter of "error": nothing to raise through */
    PyErr_Restore(exc_type, exc, tb);
    PyGILState_Release(g);
}

static PyObject *py_set_mode(PyObject *self, PyObject *args) {
    (void)self;
    int mode;
    const char *dir = NULL;
    if (!PyArg_ParseTuple(args, "i|z:_set_sync_debug_mode", &mode, &dir)) return NULL;
    if (dir && (!pkg_dir || strcmp(dir, pkg_dir) != 0)) {
        size_t n = strlen(dir) + 1;
        char *copy = malloc(n);
        if (!copy) return PyErr_NoMemory();
        memcpy(copy, dir, n);
        free(pkg_dir);
        pkg_dir = copy;
    }
    if (ts_set_sync_debug_mode((ts_sync_debug)mode) != TS_OK) return tsp_raise_pending();
    ts_set_sync_debug_handler(handler, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_get_mode(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLong((long)ts_get_sync_debug_mode());
}

static PyObject *py_snapshot_json(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    char *s = ts_memory_snapshot_json();
    if (!s) return tsp_raise_pending();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

/* ------------------------------------------------------------------ allocation history */
int tsp_history_on; /* read and written with the GIL held */

#define HISTORY_MAX_FRAMES 64

static _Thread_local uint64_t history_hash; /* of the context this thread set last; 0: none */

/* A growing string; ok turns false when memory runs out (the text is then dropped). */
typedef struct json_buf {
    char *s;
    size_t len, cap;
    bool ok;
} json_buf;

static void put_raw(json_buf *b, const char *s, size_t n) {
    if (!b->ok) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->ok = false;
            return;
        }
        b->s = t, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* s as a JSON string: quotes and backslashes escaped, control characters as \u00XX. */
static void put_string(json_buf *b, const char *s) {
    put_raw(b, "\"", 1);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\')
            put_raw(b, (char[]){'\\', (char)c}, 2);
        else if (c < 0x20)
            put_raw(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
        else
            put_raw(b, (const char *)&c, 1);
    }
    put_raw(b, "\"", 1);
}

static void put_code_attr(json_buf *b, PyCodeObject *code, const char *attr) {
    PyObject *o = PyObject_GetAttrString((PyObject *)code, attr);
    const char *s = o ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) PyErr_Clear();
    put_string(b, s ? s : "?");
    Py_XDECREF(o);
}

/* The calling thread's Python stack (innermost first, at most HISTORY_MAX_FRAMES frames) becomes
 * its allocation context. The same frames at the same lines as the thread's last call keep the
 * context already set (a hash of the code objects and lines). Out of memory: no context. */
void tsp_history_mark(void) {
    PyFrameObject *fr[HISTORY_MAX_FRAMES];
    int n = 0;
    PyFrameObject *g = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(g);
    while (g && n < HISTORY_MAX_FRAMES) {
        fr[n++] = g;
        g = PyFrame_GetBack(g); /* new reference */
    }
    Py_XDECREF(g);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over (code, line) pairs */
    for (int i = 0; i < n; i++) {
        PyCodeObject *code = PyFrame_GetCode(fr[i]);
        h = (h ^ (uint64_t)(uintptr_t)code) * 1099511628211ULL;
        h = (h ^ (uint64_t)PyFrame_GetLineNumber(fr[i])) * 1099511628211ULL;
        Py_DECREF(code);
    }
    if (h != history_hash) {
        json_buf b = {.ok = true};
        put_raw(&b, "[", 1);
        for (int i = 0; i < n; i++) {
            PyCodeObject *code = PyFrame_GetCode(fr[i]);
            char line[40];
            put_raw(&b, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
            put_code_attr(&b, code, "co_name");
            put_raw(&b, ", \"filename\": ", 14);
            put_code_attr(&b, code, "co_filename");
            put_raw(&b, line,
                    (size_t)snprintf(line, sizeof line, ", \"line\": %d}",
                                     PyFrame_GetLineNumber(fr[i])));
            Py_DECREF(code);
        }
        put_raw(&b, "]", 1);
        bool set = b.ok && ts_memory_history_context(b.s) == TS_OK;
        if (!set) ts_memory_history_context(NULL), ts_error_clear();
        history_hash = set ? h : 0;
        free(b.s);
    }
    for (int i = 0; i < n; i++) Py_DECREF(fr[i]);
}

static PyObject *py_record_history(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    ts_memory_record_history(on);
    tsp_history_on = on;
    if (!on) ts_memory_history_context(NULL), history_hash = 0;
    Py_RETURN_NONE;
}

static PyObject *py_oom_snapshot(PyObject *self, PyObject *args) {
    (void)self;
    const char *path = NULL;
    if (!PyArg_ParseTuple(args, "z:_memory_set_oom_snapshot", &path)) return NULL;
    if (ts_memory_set_oom_snapshot(path) != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyMethodDef sync_debug_methods[] = {
    {"_set_sync_debug_mode", py_set_mode, METH_VARARGS,
     "_set_sync_debug_mode(mode, package_dir=None): 0 off, 1 warn, 2 error"},
    {"_get_sync_debug_mode", py_get_mode, METH_NOARGS, NULL},
    {"_memory_snapshot_json", py_snapshot_json, METH_NOARGS, NULL},
    {"_memory_record_history", py_record_history, METH_O, NULL},
    {"_memory_set_oom_snapshot", py_oom_snapshot, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_sync_debug(PyObject *m) {
    /* TS_SYNC_DEBUG set in the environment: warnings go through Python too */
    if (ts_get_sync_debug_mode() != TS_SYNC_DEBUG_OFF) ts_set_sync_debug_handler(handler, NULL);
    return PyModule_AddFunctions(m, sync_debug_methods);
}
