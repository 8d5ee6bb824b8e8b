/* dtype.c — element types: sizes, PyTorch names and torch.promote_types. */
#include "core/internal.h"

const size_t tsi_dtype_sizes[TS_DTYPE_COUNT] = {
    [TS_DTYPE_DEFAULT] = 4,
    [TS_F32] = 4,
    [TS_F64] = 8,
    [TS_F16] = 2,
    [TS_BF16] = 2,
    [TS_I64] = 8,
    [TS_I32] = 4,
    [TS_U8] = 1,
    [TS_BOOL] = 1,
    [TS_I8] = 1,
    [TS_I16] = 2,
    [TS_U16] = 2,
    [TS_U32] = 4,
    [TS_U64] = 8,
    [TS_C64] = 8,
    [TS_C128] = 16,
    /* quantized: PyTorch's element_size (quint4x2: 1, though two share a byte in storage) */
    [TS_QINT8] = 1,
    [TS_QUINT8] = 1,
    [TS_QINT32] = 4,
    [TS_QUINT4X2] = 1,
};

size_t ts_dtype_size(ts_dtype d) { return tsi_dtype_size(d); }

const char *ts_dtype_name(ts_dtype d) {
    switch (d) {
    case TS_DTYPE_DEFAULT:
    case TS_F32:
        return "float32";
    case TS_F64:
        return "float64";
    case TS_F16:
        return "float16";
    case TS_BF16:
        return "bfloat16";
    case TS_I64:
        return "int64";
    case TS_I32:
        return "int32";
    case TS_U8:
        return "uint8";
    case TS_BOOL:
        return "bool";
    case TS_I8:
        return "int8";
    case TS_I16:
        return "int16";
    case TS_U16:
        return "uint16";
    case TS_U32:
        return "uint32";
    case TS_U64:
        return "uint64";
    case TS_C64:
        return "complex64";
    case TS_C128:
        return "complex128";
    case TS_QINT8:
        return "qint8";
    case TS_QUINT8:
        return "quint8";
    case TS_QINT32:
        return "qint32";
    case TS_QUINT4X2:
        return "quint4x2";
    default:
        return "invalid";
    }
}

const char *tsi_torch_scalar_name(ts_dtype d) {
    switch (d) {
    case TS_F32:
        return "Float";
    case TS_F64:
        return "Double";
    case TS_F16:
        return "Half";
    case TS_BF16:
        return "BFloat16";
    case TS_I64:
        return "Long";
    case TS_I32:
        return "Int";
    case TS_U8:
        return "Byte";
    case TS_BOOL:
        return "Bool";
    case TS_I8:
        return "Char";
    case TS_I16:
        return "Short";
    case TS_U16:
        return "UInt16";
    case TS_U32:
        return "UInt32";
    case TS_U64:
        return "UInt64";
    case TS_C64:
        return "ComplexFloat";
    case TS_C128:
        return "ComplexDouble";
    case TS_QINT8:
        return "QInt8";
    case TS_QUINT8:
        return "QUInt8";
    case TS_QINT32:
        return "QInt32";
    case TS_QUINT4X2:
        return "QUInt4x2";
    default:
        return "Undefined";
    }
}

bool ts_dtype_is_floating(ts_dtype d) { return tsi_is_float(tsi_resolve_dtype(d)); }
bool ts_dtype_is_complex(ts_dtype d) { return tsi_is_complex(d); }

/* rank within a category decides the winner; f16 with bf16 meets at f32 like torch */
static int float_rank(ts_dtype d) {
    switch (d) {
    case TS_F16:
    case TS_BF16:
        return 1;
    case TS_F32:
        return 2;
    case TS_F64:
        return 3;
    default:
        return 0;
    }
}
/* signed ranks by width; uint8 with int8 meets at int16 (torch: uint8 ranks with int16 against a
 * signed type, below int8 against nothing) */
static int int_rank(ts_dtype d) {
    switch (d) {
    case TS_I8:
        return 1;
    case TS_I16:
        return 2;
    case TS_I32:
        return 3;
    case TS_I64:
        return 4;
    default:
        return 0;
    }
}

ts_dtype ts_promote_types(ts_dtype a, ts_dtype b) {
    a = tsi_resolve_dtype(a);
    b = tsi_resolve_dtype(b);
    if ((unsigned)a >= TS_DTYPE_COUNT || (unsigned)b >= TS_DTYPE_COUNT) return TS_DTYPE_COUNT;
    if (a == b) return a;
    if (tsi_is_quantized(a) || tsi_is_quantized(b)) return TS_DTYPE_COUNT; /* as PyTorch: none */
    if ((a == TS_BOOL && tsi_is_wide_uint(b)) || (b == TS_BOOL && tsi_is_wide_uint(a)))
        return TS_DTYPE_COUNT;
    if (tsi_is_complex(a) || tsi_is_complex(b)) { /* complex128 when either part is double */
        if (tsi_is_wide_uint(a) || tsi_is_wide_uint(b)) return TS_DTYPE_COUNT;
        bool wide = a == TS_C128 || b == TS_C128 || a == TS_F64 || b == TS_F64;
        return wide ? TS_C128 : TS_C64;
    }
    if (a == TS_BOOL) return b;
    if (b == TS_BOOL) return a;
    bool fa = tsi_is_float(a), fb = tsi_is_float(b);
    if (fa && !fb) return a;
    if (fb && !fa) return b;
    if (fa) {
        int ra = float_rank(a), rb = float_rank(b);
        if (ra == rb) return TS_F32; /* f16 with bf16 */
        return ra > rb ? a : b;
    }
    /* PyTorch 2 promotes uint16/32/64 only with themselves, floats (above) and nothing else */
    if (tsi_is_wide_uint(a) || tsi_is_wide_uint(b)) return TS_DTYPE_COUNT;
    if (a == TS_U8 || b == TS_U8) { /* with a signed type: at least int16 */
        ts_dtype o = a == TS_U8 ? b : a;
        return int_rank(o) >= 2 ? o : TS_I16;
    }
    return int_rank(a) > int_rank(b) ? a : b;
}

bool tsi_check_promotion(const char *op, ts_dtype r, ts_dtype a, ts_dtype b) {
    if ((unsigned)r < TS_DTYPE_COUNT) return true;
    tsi_error_set(TS_ERR_DTYPE,
                  "%s: Promotion for uint16, uint32, uint64 types is not supported, attempted to "
                  "promote %s and %s",
                  op, tsi_torch_scalar_name(a), tsi_torch_scalar_name(b));
    return false;
}
