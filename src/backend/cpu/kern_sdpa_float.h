/* kern_sdpa_float.h — one ISA's float kernels (kern_sdpa_impl.h), for float32 tensors and for
 * bf16 and f16 ones computed in float (operands widened as they are packed, each result rounded
 * once), included by kern_sdpa.c once per ISA. The includer defines SDPA_T (float), SDPA_VT,
 * SDPA_VL, SDPA_MR, SDPA_NV, SDPA_BLK, SDPA_EXP and SDPA_ISA (generic, avx2, avx512: the names'
 * suffix before the dtype), and undefines them after; SDPA_NAME and SDPA_IO are set here. */
#define SDPA_NAME(x) SDPA_CAT(x, SDPA_CAT(SDPA_ISA, f32))
#include "backend/cpu/kern_sdpa_impl.h"
#undef SDPA_NAME
#define SDPA_IO      uint16_t
#define SDPA_LD(x)   ts_bf16_to_f32(x)
#define SDPA_ST(x)   ts_f32_to_bf16(x)
#define SDPA_NAME(x) SDPA_CAT(x, SDPA_CAT(SDPA_ISA, bf16))
#include "backend/cpu/kern_sdpa_impl.h"
#undef SDPA_LD
#undef SDPA_ST
#undef SDPA_NAME
#define SDPA_LD(x)   ts_f16_to_f32(x)
#define SDPA_ST(x)   ts_f32_to_f16(x)
#define SDPA_NAME(x) SDPA_CAT(x, SDPA_CAT(SDPA_ISA, f16))
#include "backend/cpu/kern_sdpa_impl.h"
#undef SDPA_IO
#undef SDPA_LD
#undef SDPA_ST
#undef SDPA_NAME
