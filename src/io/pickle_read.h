/* pickle_read.h — a small interpreter of the pickle opcodes torch.save writes (protocol 2, and the
 * protocol 3-5 opcodes of the same kinds), for the .pt reader (src/io/pt_read.c). It resolves only
 * PyTorch's weights_only allow-list of globals (tensor rebuilders, storages, dtypes, containers);
 * anything else is refused when the GLOBAL opcode names it, never run. Every value lives in one
 * arena that pk_free releases: the interpreter keeps no reference counts. */
#ifndef TESSERA_PICKLE_READ_H
#define TESSERA_PICKLE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

/* Hard limits on an untrusted pickle (a real checkpoint's is some 100 bytes per tensor). */
#define PK_MAX_PICKLE  ((size_t)256 << 20) /* data.pkl bytes */
#define PK_MAX_STACK   (1 << 20)           /* values on the stack */
#define PK_MAX_MARKS   4096                /* open MARKs */
#define PK_MAX_MEMO    (1 << 22)           /* memo slots (and no more than the pickle's bytes) */
#define PK_MAX_OBJECTS (1 << 22)           /* values created */
#define PK_MAX_STRING  ((size_t)16 << 20)  /* one string's bytes */
#define PK_MAX_TENSORS (1 << 20)           /* tensors rebuilt */

typedef enum pk_kind {
    PK_NONE,
    PK_BOOL,    /* i: 0 or 1 */
    PK_INT,     /* i */
    PK_BIGINT,  /* an int past int64: a value tensors never need */
    PK_FLOAT,   /* f */
    PK_STR,     /* s, len (UTF-8 as written; NUL-terminated) */
    PK_BYTES,   /* s, len */
    PK_TUPLE,   /* items[n] */
    PK_LIST,    /* items[n] */
    PK_DICT,    /* items[2n]: key, value, key, value... (dict, OrderedDict, Counter) */
    PK_SET,     /* items[n] (set, frozenset): unordered, so never named */
    PK_GLOBAL,  /* an allowed global: global (pk_global), dtype for storages and dtypes, s its name
                 */
    PK_STORAGE, /* a persistent id: s = key, dtype, i = numel (bytes when untyped) */
    PK_TENSOR,  /* t */
    PK_OTHER    /* a value of an allowed type the reader does not look into (device, complex...) */
} pk_kind;

typedef enum pk_global {
    PKG_NONE,
    PKG_REBUILD_TENSOR,    /* torch._utils._rebuild_tensor(storage, offset, size, stride) */
    PKG_REBUILD_TENSOR_V2, /* (storage, offset, size, stride, requires_grad, hooks[, metadata]) */
    PKG_REBUILD_TENSOR_V3, /* (... hooks, dtype[, metadata]) */
    PKG_REBUILD_PARAMETER, /* (data, requires_grad, hooks[, state]) */
    PKG_PARAMETER,         /* torch.nn.parameter.Parameter(data[, requires_grad]) */
    PKG_FROM_TYPE_V2,      /* torch._tensor._rebuild_from_type_v2(func, type, args, state) */
    PKG_DICT,              /* collections.OrderedDict, collections.Counter */
    PKG_SET,               /* builtins.set */
    PKG_SIZE,              /* torch.Size(tuple) */
    PKG_STORAGE_TYPE,      /* torch.FloatStorage ... (dtype), torch.UntypedStorage (untyped) */
    PKG_DTYPE,             /* torch.float32 ... (dtype; TS_DTYPE_DEFAULT: one Tessera lacks) */
    PKG_OPAQUE,            /* torch.device, bytearray, complex, _codecs.encode, _get_layout */
    PKG_REFUSED,           /* allowed by PyTorch, not by this reader: s says what it builds */
} pk_global;

typedef struct pk_value pk_value;

typedef struct pk_tensor {
    pk_value *storage;
    ts_dtype dtype; /* TS_DTYPE_DEFAULT: a dtype Tessera lacks (name in dtype_name) */
    const char *dtype_name;
    int64_t offset; /* elements */
    int ndim;
    int64_t size[TS_MAX_DIMS], stride[TS_MAX_DIMS];
    ts_tensor *made; /* set by the caller once materialised */
} pk_tensor;

struct pk_value {
    pk_kind kind;
    pk_global global;
    ts_dtype dtype;
    bool untyped; /* a storage (or storage type) counted in bytes */
    int64_t i;
    uint64_t nbytes; /* a storage's bytes; a storage type's item size */
    double f;
    char *s;
    size_t len;
    const char *what; /* a global's dtype Tessera lacks, or what a refused global builds */
    pk_value **items;
    size_t n, cap;
    pk_tensor *t;
};

typedef struct pk_block pk_block;
typedef struct pk_doc {
    pk_value *root;
    pk_tensor **tensors; /* every tensor rebuilt, in order */
    int n_tensors, cap_tensors;
    pk_block *blocks; /* the arena */
    size_t n_objects;
} pk_doc;

/* Runs the pickle (size bytes; file names it in messages: "<file>: data.pkl byte 12 (opcode
 * 'c'): ..."). TS_ERR_FORMAT for a malformed pickle or one past the limits, TS_ERR_UNSUPPORTED for
 * a global off the allow-list (PyTorch's message), an opcode or a tensor kind the reader lacks. On
 * failure doc is freed and empty. */
ts_status pk_parse(const char *file, const unsigned char *data, size_t size, pk_doc *doc);
void pk_free(pk_doc *doc);

#endif /* TESSERA_PICKLE_READ_H */
