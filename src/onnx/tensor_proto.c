/* tensor_proto.c — ONNX TensorProto <-> tensor: element types, the typed and raw data fields and
 * external data files, each size checked against the dims before anything is allocated. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx_internal.h"

static void *pb_alloc(void *data, size_t size) {
    (void)data;
    return malloc(size ? size : 1);
}
static void pb_free(void *data, void *p) {
    (void)data;
    free(p);
}
ProtobufCAllocator tso_pb_allocator = {pb_alloc, pb_free, NULL};

ts_dtype tso_dtype_from_onnx(int32_t t) {
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        return TS_F32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return TS_F64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
        return TS_F16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        return TS_BF16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        return TS_I64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        return TS_I32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        return TS_U8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return TS_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        return TS_I8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
        return TS_I16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        return TS_U16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        return TS_U32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
        return TS_U64;
    default:
        return TS_DTYPE_DEFAULT;
    }
}

int32_t tso_dtype_to_onnx(ts_dtype d) {
    switch (tsi_resolve_dtype(d)) {
    case TS_F32:
        return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case TS_F64:
        return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case TS_F16:
        return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case TS_BF16:
        return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    case TS_I64:
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case TS_I32:
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case TS_U8:
        return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case TS_BOOL:
        return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    case TS_I8:
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    case TS_I16:
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT16;
    case TS_U16:
        return ONNX__TENSOR_PROTO__DATA_TYPE__UINT16;
    case TS_U32:
        return ONNX__TENSOR_PROTO__DATA_TYPE__UINT32;
    case TS_U64:
        return ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
    default:
        return 0;
    }
}

const char *tso_onnx_type_name(int32_t t) {
    static const char *names[] = {
        "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
        "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
        "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4"};
    if (t >= 0 && t < (int32_t)(sizeof names / sizeof *names)) return names[t];
    return "an unknown type";
}

/* The bytes of an external data file: location relative to base_dir, inside it (no absolute
 * path, no ".."), offset and length within the file. */
static bool read_external(const Onnx__TensorProto *tp, const char *base_dir, const char *what,
                          void *dst, size_t nbytes) {
    const char *loc = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value) continue;
        char *end = NULL;
        if (!strcmp(e->key, "location"))
            loc = e->value;
        else if (!strcmp(e->key, "offset") || !strcmp(e->key, "length")) {
            errno = 0;
            long long x = strtoll(e->value, &end, 10);
            if (errno || end == e->value || *end || x < 0)
                return tsi_error_set(TS_ERR_FORMAT,
                                     "onnx_load: tensor '%s': external data %s '%.40s' is not a "
                                     "non-negative integer",
                                     what, e->key, e->value),
                       false;
            if (e->key[0] == 'o')
                offset = x;
            else
                length = x;
        }
    }
    if (!loc || !loc[0])
        return tsi_error_set(TS_ERR_FORMAT,
                             "onnx_load: tensor '%s': external data without a location", what),
               false;
    if (!base_dir)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "onnx_load: tensor '%s': external data ('%.200s') needs the model's "
                             "folder: load the model from a file",
                             what, loc),
               false;
    if (loc[0] == '/' || strstr(loc, "..") || strchr(loc, '\\'))
        return tsi_error_set(TS_ERR_FORMAT,
                             "onnx_load: tensor '%s': external data location '%.200s' leaves the "
                             "model's folder",
                             what, loc),
               false;
    if (length >= 0 && (unsigned long long)length != nbytes)
        return tsi_error_set(TS_ERR_FORMAT,
                             "onnx_load: tensor '%s': external data length %lld, but its dims "
                             "need %zu bytes",
                             what, length, nbytes),
               false;
    size_t plen = strlen(base_dir) + strlen(loc) + 2;
    char *path = malloc(plen);
    if (!path) return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory"), false;
    snprintf(path, plen, "%s/%s", base_dir, loc);
    /* a FIFO or a device would block or never end: regular files only (checked before open) */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        tsi_error_set(TS_ERR_FORMAT,
                      "onnx_load: tensor '%s': external data %s is not a regular file", what, path);
        free(path);
        return false;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        tsi_error_set(TS_ERR_IO, "onnx_load: tensor '%s': cannot open external data %s: %s", what,
                      path, strerror(errno));
        free(path);
        return false;
    }
    bool ok = fstat(fileno(f), &st) == 0;
    if (!ok || (unsigned long long)offset > (unsigned long long)st.st_size ||
        (unsigned long long)st.st_size - (unsigned long long)offset < nbytes) {
        tsi_error_set(TS_ERR_FORMAT,
                      "onnx_load: tensor '%s': external data %s holds %lld bytes, shorter than "
                      "offset %lld + %zu bytes",
                      what, path, ok ? (long long)st.st_size : -1LL, offset, nbytes);
        ok = false;
    } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 ||
               (nbytes && fread(dst, 1, nbytes, f) != nbytes)) {
        tsi_error_set(TS_ERR_IO, "onnx_load: tensor '%s': reading %s failed", what, path);
        ok = false;
    }
    fclose(f);
    free(path);
    return ok;
}

ts_tensor *tso_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir, ts_device dev,
                                 const char *what) {
    if (!what || !what[0]) what = "(unnamed)";
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    ts_dtype dt = tso_dtype_from_onnx(ot);
    /* INT4 / UINT4: packed two a byte, low nibble first (an odd count's last high nibble is
     * padding), held one a byte as int8 / uint8 (sign-extended) */
    const bool int4 = ot == TSO_ONNX_INT4 || ot == TSO_ONNX_UINT4;
    if (int4) dt = ot == TSO_ONNX_INT4 ? TS_I8 : TS_U8;
    if (dt == TS_DTYPE_DEFAULT)
        return tsi_error_set(ot == 0 ? TS_ERR_FORMAT : TS_ERR_UNSUPPORTED,
                             "onnx_load: tensor '%.200s' has element type %s, which Tessera "
                             "lacks",
                             what, tso_onnx_type_name(ot)),
               NULL;
    if (tp->n_dims > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "onnx_load: tensor '%.200s' has rank %zu; Tessera holds at most %d",
                             what, tp->n_dims, TS_MAX_DIMS),
               NULL;
    if (tp->segment)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "onnx_load: tensor '%.200s' is segmented", what),
               NULL;
    ts_shape s = {.ndim = (int)tp->n_dims};
    uint64_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        int64_t d = tp->dims[i];
        if (d < 0)
            return tsi_error_set(TS_ERR_FORMAT, "onnx_load: tensor '%.200s' has dim %zu = %lld",
                                 what, i, (long long)d),
                   NULL;
        s.dims[i] = d;
        if (d && numel > (uint64_t)INT64_MAX / (uint64_t)d / 8)
            return tsi_error_set(TS_ERR_FORMAT,
                                 "onnx_load: tensor '%.200s': the product of its dims overflows",
                                 what),
                   NULL;
        numel *= (uint64_t)d;
    }
    size_t esz = tsi_dtype_size(dt);
    const size_t unpacked = (size_t)numel * esz;
    size_t nbytes = int4 ? ((size_t)numel + 1) / 2 : unpacked; /* the bytes the file holds */
    bool external =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* where the values are, and that they fill the dims exactly */
    size_t have = 0;
    const char *field = "no data";
    if (external)
        field = "external data", have = nbytes;
    else if (tp->has_raw_data)
        field = "raw_data", have = tp->raw_data.len;
    else if (tp->n_float_data)
        field = "float_data", have = tp->n_float_data * esz;
    else if (tp->n_int32_data)
        field = "int32_data", have = tp->n_int32_data * esz;
    else if (tp->n_int64_data)
        field = "int64_data", have = tp->n_int64_data * esz;
    else if (tp->n_double_data)
        field = "double_data", have = tp->n_double_data * esz;
    else if (tp->n_uint64_data)
        field = "uint64_data", have = tp->n_uint64_data * esz;
    bool typed_ok = true;
    if (tp->n_float_data) typed_ok = dt == TS_F32;
    if (tp->n_int64_data) typed_ok = dt == TS_I64;
    if (tp->n_double_data) typed_ok = dt == TS_F64;
    /* uint64_data holds uint32 and uint64; int32_data every narrower type but float */
    if (tp->n_uint64_data) typed_ok = dt == TS_U32 || dt == TS_U64;
    if (tp->n_int32_data)
        typed_ok = dt != TS_F32 && dt != TS_F64 && dt != TS_I64 && dt != TS_U32 && dt != TS_U64;
    if (!tp->has_raw_data && !external && !typed_ok)
        return tsi_error_set(TS_ERR_FORMAT,
                             "onnx_load: tensor '%.200s' of type %s stores its values in %s", what,
                             tso_onnx_type_name(ot), field),
               NULL;
    if (have != nbytes)
        return tsi_error_set(TS_ERR_FORMAT,
                             "onnx_load: tensor '%.200s' (%s %s): %s holds %zu bytes, its dims "
                             "need %zu",
                             what, tso_onnx_type_name(ot), tsi_shape_str(s), field, have, nbytes),
               NULL;
    void *host = malloc(unpacked ? unpacked : 1);
    if (!host)
        return tsi_error_set(TS_ERR_OOM,
                             "onnx_load: out of host memory for tensor '%.200s' (%zu bytes)", what,
                             unpacked),
               NULL;
    bool ok = true;
    if (external)
        ok = read_external(tp, base_dir, what, host, nbytes);
    else if (!nbytes) {
        /* empty: nothing to copy (and raw_data's pointer may be NULL) */
    } else if (tp->has_raw_data)
        memcpy(host, tp->raw_data.data, nbytes);
    else if (tp->n_float_data)
        memcpy(host, tp->float_data, nbytes);
    else if (tp->n_int64_data)
        memcpy(host, tp->int64_data, nbytes);
    else if (tp->n_double_data)
        memcpy(host, tp->double_data, nbytes);
    else if (tp->n_uint64_data) {
        for (size_t i = 0; i < numel; i++) {
            if (dt == TS_U32)
                ((uint32_t *)host)[i] = (uint32_t)tp->uint64_data[i];
            else
                ((uint64_t *)host)[i] = tp->uint64_data[i];
        }
    } else if (tp->n_int32_data) {
        for (size_t i = 0; i < (int4 ? nbytes : numel); i++) {
            int32_t v = tp->int32_data[i];
            switch (dt) {
            case TS_I32:
                ((int32_t *)host)[i] = v;
                break;
            case TS_F16:
            case TS_BF16:
                ((uint16_t *)host)[i] = (uint16_t)v;
                break;
            case TS_U8:
                ((uint8_t *)host)[i] = (uint8_t)v;
                break;
            case TS_I8:
                ((int8_t *)host)[i] = (int8_t)v;
                break;
            case TS_I16:
                ((int16_t *)host)[i] = (int16_t)v;
                break;
            case TS_U16:
                ((uint16_t *)host)[i] = (uint16_t)v;
                break;
            case TS_BOOL:
                ((uint8_t *)host)[i] = v != 0;
                break;
            default:
                break;
            }
        }
    }
    if (ok && int4) /* unpacked in place from the end: byte i / 2 is read before it is written */
        for (size_t i = numel; i-- > 0;) {
            const unsigned v = (((const uint8_t *)host)[i / 2] >> (i % 2 ? 4 : 0)) & 15u;
            ((uint8_t *)host)[i] = (uint8_t)(dt == TS_I8 && v > 7 ? v - 16 : v);
        }
    if (ok && dt == TS_BOOL) /* raw bools must be 0 or 1 */
        for (size_t i = 0; i < numel; i++) ((uint8_t *)host)[i] = ((uint8_t *)host)[i] != 0;
    ts_tensor *t = ok ? tsi_from_host("onnx_load", s, dt, host, dev) : NULL;
    free(host);
    return t;
}

ts_tensor *ts_onnx_tensor_parse(const void *data, size_t size, ts_device dev, char **name) {
    if (name) *name = NULL;
    if (!data && size) return tsi_error_set(TS_ERR_ARG, "onnx_tensor_parse: data is NULL"), NULL;
    if (size > TSO_MAX_FILE_BYTES)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_tensor_parse: %zu bytes is past protobuf's 2 GiB",
                             size),
               NULL;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&tso_pb_allocator, size, data);
    if (!tp) {
        if (ts_fault_alloc_fired())
            return tsi_error_set(TS_ERR_OOM, "onnx_tensor_parse: out of host memory"), NULL;
        return tsi_error_set(TS_ERR_FORMAT,
                             "onnx_tensor_parse: not a valid TensorProto (%zu bytes)", size),
               NULL;
    }
    ts_tensor *t = tso_tensor_from_proto(tp, NULL, dev, tp->name);
    if (t && name) {
        *name = tsi_strdup(tp->name ? tp->name : "");
        if (!*name) {
            ts_release(t);
            t = NULL;
            tsi_error_set(TS_ERR_OOM, "onnx_tensor_parse: out of host memory");
        }
    }
    onnx__tensor_proto__free_unpacked(tp, &tso_pb_allocator);
    return t ? tsi_own(t) : NULL;
}

/* A whole file into memory (at most TSO_MAX_FILE_BYTES). */
bool tso_read_file(const char *op, const char *path, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op), false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tsi_error_set(TS_ERR_IO, "%s: cannot open %s: %s", op, path, strerror(errno)), false;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return tsi_error_set(TS_ERR_IO, "%s: %s is not a regular file", op, path), false;
    }
    if ((unsigned long long)st.st_size > TSO_MAX_FILE_BYTES) {
        fclose(f);
        return tsi_error_set(TS_ERR_FORMAT, "%s: %s is %lld bytes, past protobuf's 2 GiB", op, path,
                             (long long)st.st_size),
               false;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %s (%zu bytes)", op, path, n),
               false;
    }
    if (n && fread(buf, 1, n, f) != n) {
        fclose(f);
        free(buf);
        return tsi_error_set(TS_ERR_IO, "%s: reading %s failed", op, path), false;
    }
    fclose(f);
    *data = buf;
    *size = n;
    return true;
}

ts_tensor *ts_onnx_tensor_load(const char *path, ts_device dev, char **name) {
    if (name) *name = NULL;
    uint8_t *data;
    size_t size;
    if (!tso_read_file("onnx_tensor_load", path, &data, &size)) return NULL;
    ts_tensor *t = ts_onnx_tensor_parse(data, size, dev, name);
    free(data);
    return t;
}
