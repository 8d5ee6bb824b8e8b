/* test_print.c — ts_to_string / ts_print against strings produced by PyTorch 1.13's repr. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

/* Expected strings come from tests/gen_print_cases.py (torch 1.13's repr; the sim cases go through
 * torch's own _add_suffixes with device='sim:N' first, as torch does for cuda:0). Each row: name,
 * print options (precision, threshold, edgeitems, linewidth), expected text. The comment above
 * each row is the Python expression; make_case() builds the same tensor in C. */
typedef struct pcase {
    const char *name;
    int precision, threshold, edgeitems, linewidth;
    const char *expected;
} pcase;

static const pcase CASES[] = {
    /* torch.tensor([1., 2., 3.]) */
    {"f32_int_mode", 4, 1000, 3, 80, "tensor([1., 2., 3.])"},
    /* torch.tensor([1.5, -2.25, 3.]) */
    {"f32_fixed", 4, 1000, 3, 80, "tensor([ 1.5000, -2.2500,  3.0000])"},
    /* torch.tensor([12345.678, 99999.5, 100.25]) */
    {"f32_rounding", 4, 1000, 3, 80, "tensor([12345.6777, 99999.5000,   100.2500])"},
    /* torch.tensor([1e-5, 1.0]) */
    {"f32_sci_small", 4, 1000, 3, 80, "tensor([1.0000e-05, 1.0000e+00])"},
    /* torch.tensor([123456.789, 0.5]) */
    {"f32_sci_ratio", 4, 1000, 3, 80, "tensor([1.2346e+05, 5.0000e-01])"},
    /* torch.tensor([-1e-10, 3e5, 0.]) */
    {"f32_sci_neg", 4, 1000, 3, 80, "tensor([-1.0000e-10,  3.0000e+05,  0.0000e+00])"},
    /* torch.tensor([1., 1e9]) */
    {"int_mode_sci_big", 4, 1000, 3, 80, "tensor([1.0000e+00, 1.0000e+09])"},
    /* torch.tensor([1., 2000., -3.]) */
    {"int_mode_sci_ratio", 4, 1000, 3, 80, "tensor([ 1.0000e+00,  2.0000e+03, -3.0000e+00])"},
    /* torch.tensor([1., -100., 7.]) */
    {"int_mode_width", 4, 1000, 3, 80, "tensor([   1., -100.,    7.])"},
    /* torch.tensor([nan, inf, -inf, 1.]) */
    {"nonfinite", 4, 1000, 3, 80, "tensor([nan, inf, -inf, 1.])"},
    /* torch.tensor([nan, 1.5, -nan]) */
    {"nan_fixed", 4, 1000, 3, 80, "tensor([   nan, 1.5000,    nan])"},
    /* torch.tensor([1.5, nan, 1e9]) */
    {"nan_sci", 4, 1000, 3, 80, "tensor([1.5000e+00,        nan, 1.0000e+09])"},
    /* torch.tensor([0., 0.]) */
    {"all_zero", 4, 1000, 3, 80, "tensor([0., 0.])"},
    /* torch.tensor([nan, nan]) */
    {"all_nan", 4, 1000, 3, 80, "tensor([nan, nan])"},
    /* torch.tensor([-0., 1.]) */
    {"neg_zero", 4, 1000, 3, 80, "tensor([-0., 1.])"},
    /* torch.tensor([0.1, 0.25], dtype=f64) */
    {"f64_fixed", 4, 1000, 3, 80, "tensor([0.1000, 0.2500], dtype=torch.float64)"},
    /* torch.tensor([1e-300, 1.], dtype=f64) */
    {"f64_exp3", 4, 1000, 3, 80, "tensor([1.0000e-300,  1.0000e+00], dtype=torch.float64)"},
    /* torch.tensor([1.5, 2., 0.1], dtype=f16) */
    {"f16", 4, 1000, 3, 80, "tensor([1.5000, 2.0000, 0.1000], dtype=torch.float16)"},
    /* torch.tensor([1.5, 2., 0.1], dtype=bf16) */
    {"bf16", 4, 1000, 3, 80, "tensor([1.5000, 2.0000, 0.1001], dtype=torch.bfloat16)"},
    /* torch.arange(10) */
    {"i64_arange", 4, 1000, 3, 80, "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"},
    /* torch.tensor([-5, 100, 7]) */
    {"i64_width", 4, 1000, 3, 80, "tensor([ -5, 100,   7])"},
    /* torch.tensor([2**62 + 1, -1]) */
    {"i64_big", 4, 1000, 3, 80, "tensor([4611686018427387905,                  -1])"},
    /* torch.tensor([1, 2, 3], dtype=i32) */
    {"i32", 4, 1000, 3, 80, "tensor([1, 2, 3], dtype=torch.int32)"},
    /* torch.tensor([0, 255, 7], dtype=u8) */
    {"u8", 4, 1000, 3, 80, "tensor([  0, 255,   7], dtype=torch.uint8)"},
    /* torch.tensor([True, False, True]) */
    {"bool", 4, 1000, 3, 80, "tensor([ True, False,  True])"},
    /* torch.tensor(3.) */
    {"scalar_f32", 4, 1000, 3, 80, "tensor(3.)"},
    /* torch.tensor(-2.5, dtype=f64) */
    {"scalar_f64", 4, 1000, 3, 80, "tensor(-2.5000, dtype=torch.float64)"},
    /* torch.tensor(7) */
    {"scalar_i64", 4, 1000, 3, 80, "tensor(7)"},
    /* torch.tensor(True) */
    {"scalar_bool", 4, 1000, 3, 80, "tensor(True)"},
    /* torch.tensor(nan) */
    {"scalar_nan", 4, 1000, 3, 80, "tensor(nan)"},
    /* torch.tensor([]) */
    {"empty_1d", 4, 1000, 3, 80, "tensor([])"},
    /* torch.zeros(0, 3) */
    {"empty_2d", 4, 1000, 3, 80, "tensor([], size=(0, 3))"},
    /* torch.zeros(2, 0, 4, dtype=torch.int64) */
    {"empty_3d_i64", 4, 1000, 3, 80, "tensor([], size=(2, 0, 4), dtype=torch.int64)"},
    /* torch.zeros(0, dtype=torch.bool) */
    {"empty_bool", 4, 1000, 3, 80, "tensor([], dtype=torch.bool)"},
    /* torch.arange(6.).reshape(2, 3) */
    {"mat_2x3", 4, 1000, 3, 80,
     "tensor([[0., 1., 2.],\n"
     "        [3., 4., 5.]])"},
    /* torch.arange(24.).reshape(2, 3, 4) / 4 */
    {"mat_2x3x4", 4, 1000, 3, 80,
     "tensor([[[0.0000, 0.2500, 0.5000, 0.7500],\n"
     "         [1.0000, 1.2500, 1.5000, 1.7500],\n"
     "         [2.0000, 2.2500, 2.5000, 2.7500]],\n"
     "\n"
     "        [[3.0000, 3.2500, 3.5000, 3.7500],\n"
     "         [4.0000, 4.2500, 4.5000, 4.7500],\n"
     "         [5.0000, 5.2500, 5.5000, 5.7500]]])"},
    /* torch.arange(16).reshape(2, 2, 2, 2) */
    {"mat_4d_int", 4, 1000, 3, 80,
     "tensor([[[[ 0,  1],\n"
     "          [ 2,  3]],\n"
     "\n"
     "         [[ 4,  5],\n"
     "          [ 6,  7]]],\n"
     "\n"
     "\n"
     "        [[[ 8,  9],\n"
     "          [10, 11]],\n"
     "\n"
     "         [[12, 13],\n"
     "          [14, 15]]]])"},
    /* torch.arange(6.).reshape(2, 3).t() */
    {"transposed", 4, 1000, 3, 80,
     "tensor([[0., 3.],\n"
     "        [1., 4.],\n"
     "        [2., 5.]])"},
    /* torch.arange(10)[::3] */
    {"strided_slice", 4, 1000, 3, 80, "tensor([0, 3, 6, 9])"},
    /* torch.arange(2000) */
    {"sum_1d", 4, 1000, 3, 80, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"},
    /* torch.arange(2000.).reshape(40, 50) */
    {"sum_2d_sci", 4, 1000, 3, 80,
     "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
     "         4.9000e+01],\n"
     "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
     "         9.9000e+01],\n"
     "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
     "         1.4900e+02],\n"
     "        ...,\n"
     "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
     "         1.8990e+03],\n"
     "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
     "         1.9490e+03],\n"
     "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
     "         1.9990e+03]])"},
    /* torch.arange(1100.).reshape(10, 11, 10) / 7 */
    {"sum_3d", 4, 1000, 3, 80,
     "tensor([[[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 1.0000e+00,\n"
     "          1.1429e+00, 1.2857e+00],\n"
     "         [1.4286e+00, 1.5714e+00, 1.7143e+00,  ..., 2.4286e+00,\n"
     "          2.5714e+00, 2.7143e+00],\n"
     "         [2.8571e+00, 3.0000e+00, 3.1429e+00,  ..., 3.8571e+00,\n"
     "          4.0000e+00, 4.1429e+00],\n"
     "         ...,\n"
     "         [1.1429e+01, 1.1571e+01, 1.1714e+01,  ..., 1.2429e+01,\n"
     "          1.2571e+01, 1.2714e+01],\n"
     "         [1.2857e+01, 1.3000e+01, 1.3143e+01,  ..., 1.3857e+01,\n"
     "          1.4000e+01, 1.4143e+01],\n"
     "         [1.4286e+01, 1.4429e+01, 1.4571e+01,  ..., 1.5286e+01,\n"
     "          1.5429e+01, 1.5571e+01]],\n"
     "\n"
     "        [[1.5714e+01, 1.5857e+01, 1.6000e+01,  ..., 1.6714e+01,\n"
     "          1.6857e+01, 1.7000e+01],\n"
     "         [1.7143e+01, 1.7286e+01, 1.7429e+01,  ..., 1.8143e+01,\n"
     "          1.8286e+01, 1.8429e+01],\n"
     "         [1.8571e+01, 1.8714e+01, 1.8857e+01,  ..., 1.9571e+01,\n"
     "          1.9714e+01, 1.9857e+01],\n"
     "         ...,\n"
     "         [2.7143e+01, 2.7286e+01, 2.7429e+01,  ..., 2.8143e+01,\n"
     "          2.8286e+01, 2.8429e+01],\n"
     "         [2.8571e+01, 2.8714e+01, 2.8857e+01,  ..., 2.9571e+01,\n"
     "          2.9714e+01, 2.9857e+01],\n"
     "         [3.0000e+01, 3.0143e+01, 3.0286e+01,  ..., 3.1000e+01,\n"
     "          3.1143e+01, 3.1286e+01]],\n"
     "\n"
     "        [[3.1429e+01, 3.1571e+01, 3.1714e+01,  ..., 3.2429e+01,\n"
     "          3.2571e+01, 3.2714e+01],\n"
     "         [3.2857e+01, 3.3000e+01, 3.3143e+01,  ..., 3.3857e+01,\n"
     "          3.4000e+01, 3.4143e+01],\n"
     "         [3.4286e+01, 3.4429e+01, 3.4571e+01,  ..., 3.5286e+01,\n"
     "          3.5429e+01, 3.5571e+01],\n"
     "         ...,\n"
     "         [4.2857e+01, 4.3000e+01, 4.3143e+01,  ..., 4.3857e+01,\n"
     "          4.4000e+01, 4.4143e+01],\n"
     "         [4.4286e+01, 4.4429e+01, 4.4571e+01,  ..., 4.5286e+01,\n"
     "          4.5429e+01, 4.5571e+01],\n"
     "         [4.5714e+01, 4.5857e+01, 4.6000e+01,  ..., 4.6714e+01,\n"
     "          4.6857e+01, 4.7000e+01]],\n"
     "\n"
     "        ...,\n"
     "\n"
     "        [[1.1000e+02, 1.1014e+02, 1.1029e+02,  ..., 1.1100e+02,\n"
     "          1.1114e+02, 1.1129e+02],\n"
     "         [1.1143e+02, 1.1157e+02, 1.1171e+02,  ..., 1.1243e+02,\n"
     "          1.1257e+02, 1.1271e+02],\n"
     "         [1.1286e+02, 1.1300e+02, 1.1314e+02,  ..., 1.1386e+02,\n"
     "          1.1400e+02, 1.1414e+02],\n"
     "         ...,\n"
     "         [1.2143e+02, 1.2157e+02, 1.2171e+02,  ..., 1.2243e+02,\n"
     "          1.2257e+02, 1.2271e+02],\n"
     "         [1.2286e+02, 1.2300e+02, 1.2314e+02,  ..., 1.2386e+02,\n"
     "          1.2400e+02, 1.2414e+02],\n"
     "         [1.2429e+02, 1.2443e+02, 1.2457e+02,  ..., 1.2529e+02,\n"
     "          1.2543e+02, 1.2557e+02]],\n"
     "\n"
     "        [[1.2571e+02, 1.2586e+02, 1.2600e+02,  ..., 1.2671e+02,\n"
     "          1.2686e+02, 1.2700e+02],\n"
     "         [1.2714e+02, 1.2729e+02, 1.2743e+02,  ..., 1.2814e+02,\n"
     "          1.2829e+02, 1.2843e+02],\n"
     "         [1.2857e+02, 1.2871e+02, 1.2886e+02,  ..., 1.2957e+02,\n"
     "          1.2971e+02, 1.2986e+02],\n"
     "         ...,\n"
     "         [1.3714e+02, 1.3729e+02, 1.3743e+02,  ..., 1.3814e+02,\n"
     "          1.3829e+02, 1.3843e+02],\n"
     "         [1.3857e+02, 1.3871e+02, 1.3886e+02,  ..., 1.3957e+02,\n"
     "          1.3971e+02, 1.3986e+02],\n"
     "         [1.4000e+02, 1.4014e+02, 1.4029e+02,  ..., 1.4100e+02,\n"
     "          1.4114e+02, 1.4129e+02]],\n"
     "\n"
     "        [[1.4143e+02, 1.4157e+02, 1.4171e+02,  ..., 1.4243e+02,\n"
     "          1.4257e+02, 1.4271e+02],\n"
     "         [1.4286e+02, 1.4300e+02, 1.4314e+02,  ..., 1.4386e+02,\n"
     "          1.4400e+02, 1.4414e+02],\n"
     "         [1.4429e+02, 1.4443e+02, 1.4457e+02,  ..., 1.4529e+02,\n"
     "          1.4543e+02, 1.4557e+02],\n"
     "         ...,\n"
     "         [1.5286e+02, 1.5300e+02, 1.5314e+02,  ..., 1.5386e+02,\n"
     "          1.5400e+02, 1.5414e+02],\n"
     "         [1.5429e+02, 1.5443e+02, 1.5457e+02,  ..., 1.5529e+02,\n"
     "          1.5543e+02, 1.5557e+02],\n"
     "         [1.5571e+02, 1.5586e+02, 1.5600e+02,  ..., 1.5671e+02,\n"
     "          1.5686e+02, 1.5700e+02]]])"},
    /* torch.arange(2000.).reshape(40, 50).t() */
    {"sum_transposed", 4, 1000, 3, 80,
     "tensor([[0.0000e+00, 5.0000e+01, 1.0000e+02,  ..., 1.8500e+03, 1.9000e+03,\n"
     "         1.9500e+03],\n"
     "        [1.0000e+00, 5.1000e+01, 1.0100e+02,  ..., 1.8510e+03, 1.9010e+03,\n"
     "         1.9510e+03],\n"
     "        [2.0000e+00, 5.2000e+01, 1.0200e+02,  ..., 1.8520e+03, 1.9020e+03,\n"
     "         1.9520e+03],\n"
     "        ...,\n"
     "        [4.7000e+01, 9.7000e+01, 1.4700e+02,  ..., 1.8970e+03, 1.9470e+03,\n"
     "         1.9970e+03],\n"
     "        [4.8000e+01, 9.8000e+01, 1.4800e+02,  ..., 1.8980e+03, 1.9480e+03,\n"
     "         1.9980e+03],\n"
     "        [4.9000e+01, 9.9000e+01, 1.4900e+02,  ..., 1.8990e+03, 1.9490e+03,\n"
     "         1.9990e+03]])"},
    /* torch.tensor([1., -2., 3.5]).expand(500, 3) */
    {"sum_expanded", 4, 1000, 3, 80,
     "tensor([[ 1.0000, -2.0000,  3.5000],\n"
     "        [ 1.0000, -2.0000,  3.5000],\n"
     "        [ 1.0000, -2.0000,  3.5000],\n"
     "        ...,\n"
     "        [ 1.0000, -2.0000,  3.5000],\n"
     "        [ 1.0000, -2.0000,  3.5000],\n"
     "        [ 1.0000, -2.0000,  3.5000]])"},
    /* torch.arange(2000.).reshape(2, 1000) / 1000 */
    {"sum_rows_only_cols", 4, 1000, 3, 80,
     "tensor([[0.0000e+00, 1.0000e-03, 2.0000e-03,  ..., 9.9700e-01, 9.9800e-01,\n"
     "         9.9900e-01],\n"
     "        [1.0000e+00, 1.0010e+00, 1.0020e+00,  ..., 1.9970e+00, 1.9980e+00,\n"
     "         1.9990e+00]])"},
    /* torch.arange(30, dtype=f64) / 29 */
    {"wrap_f64", 4, 1000, 3, 80,
     "tensor([0.0000, 0.0345, 0.0690, 0.1034, 0.1379, 0.1724, 0.2069, 0.2414, 0.2759,\n"
     "        0.3103, 0.3448, 0.3793, 0.4138, 0.4483, 0.4828, 0.5172, 0.5517, 0.5862,\n"
     "        0.6207, 0.6552, 0.6897, 0.7241, 0.7586, 0.7931, 0.8276, 0.8621, 0.8966,\n"
     "        0.9310, 0.9655, 1.0000], dtype=torch.float64)"},
    /* torch.arange(100) */
    {"wrap_int", 4, 1000, 3, 80,
     "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
     "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
     "        36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53,\n"
     "        54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71,\n"
     "        72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89,\n"
     "        90, 91, 92, 93, 94, 95, 96, 97, 98, 99])"},
    /* torch.arange(40.).reshape(2, 20) / 3 */
    {"wrap_2d", 4, 1000, 3, 80,
     "tensor([[ 0.0000,  0.3333,  0.6667,  1.0000,  1.3333,  1.6667,  2.0000,  2.3333,\n"
     "          2.6667,  3.0000,  3.3333,  3.6667,  4.0000,  4.3333,  4.6667,  5.0000,\n"
     "          5.3333,  5.6667,  6.0000,  6.3333],\n"
     "        [ 6.6667,  7.0000,  7.3333,  7.6667,  8.0000,  8.3333,  8.6667,  9.0000,\n"
     "          9.3333,  9.6667, 10.0000, 10.3333, 10.6667, 11.0000, 11.3333, 11.6667,\n"
     "         12.0000, 12.3333, 12.6667, 13.0000]])"},
    /* torch.ones(2, requires_grad=True) */
    {"grad", 4, 1000, 3, 80, "tensor([1., 1.], requires_grad=True)"},
    /* torch.tensor([1., 2.], dtype=f64, requires_grad=True) */
    {"grad_f64", 4, 1000, 3, 80, "tensor([1., 2.], dtype=torch.float64, requires_grad=True)"},
    /* (torch.arange(16, dtype=f64) / 3).requires_grad_() */
    {"suffix_wrap", 4, 1000, 3, 80,
     "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
     "        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000],\n"
     "       dtype=torch.float64, requires_grad=True)"},
    /* (torch.arange(12, dtype=f64) / 3).reshape(2, 6) */
    {"suffix_wrap_2d", 4, 1000, 3, 80,
     "tensor([[0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667],\n"
     "        [2.0000, 2.3333, 2.6667, 3.0000, 3.3333, 3.6667]], dtype=torch.float64)"},
    /* torch.tensor([1.12345, 2.5]) */
    {"opt_precision", 2, 1000, 3, 80, "tensor([1.12, 2.50])"},
    /* torch.tensor([1.5, 2.5, -3.25]) */
    {"opt_precision0", 0, 1000, 3, 80, "tensor([ 2,  2, -3])"},
    /* torch.arange(10) */
    {"opt_threshold", 4, 5, 3, 80, "tensor([0, 1, 2,  ..., 7, 8, 9])"},
    /* torch.arange(24).reshape(4, 6) */
    {"opt_edgeitems", 4, 5, 2, 80,
     "tensor([[ 0,  1,  ...,  4,  5],\n"
     "        [ 6,  7,  ..., 10, 11],\n"
     "        [12, 13,  ..., 16, 17],\n"
     "        [18, 19,  ..., 22, 23]])"},
    /* torch.arange(30.) / 7 */
    {"opt_linewidth", 4, 1000, 3, 40,
     "tensor([0.0000, 0.1429, 0.2857, 0.4286,\n"
     "        0.5714, 0.7143, 0.8571, 1.0000,\n"
     "        1.1429, 1.2857, 1.4286, 1.5714,\n"
     "        1.7143, 1.8571, 2.0000, 2.1429,\n"
     "        2.2857, 2.4286, 2.5714, 2.7143,\n"
     "        2.8571, 3.0000, 3.1429, 3.2857,\n"
     "        3.4286, 3.5714, 3.7143, 3.8571,\n"
     "        4.0000, 4.1429])"},
    /* torch.tensor([1., 2.]) */
    {"sim_f32", 4, 1000, 3, 80, "tensor([1., 2.], device='sim:0')"},
    /* torch.tensor([0, 1, 2], dtype=i32) */
    {"sim_i32", 4, 1000, 3, 80, "tensor([0, 1, 2], device='sim:1', dtype=torch.int32)"},
    /* torch.zeros(0, 3) */
    {"sim_empty", 4, 1000, 3, 80, "tensor([], device='sim:0', size=(0, 3))"},
    /* torch.tensor(2.5) */
    {"sim_scalar", 4, 1000, 3, 80, "tensor(2.5000, device='sim:3')"},
    /* torch.zeros(2, 2, requires_grad=True) */
    {"sim_grad", 4, 1000, 3, 80,
     "tensor([[0., 0.],\n"
     "        [0., 0.]], device='sim:0', requires_grad=True)"},
    /* torch.arange(16, dtype=f64) / 3 */
    {"sim_wrap", 4, 1000, 3, 80,
     "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
     "        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000],\n"
     "       device='sim:2', dtype=torch.float64)"},
    /* torch.arange(2000.).reshape(40, 50) / 3 */
    {"sim_summarized", 4, 1000, 3, 80,
     "tensor([[0.0000e+00, 3.3333e-01, 6.6667e-01,  ..., 1.5667e+01, 1.6000e+01,\n"
     "         1.6333e+01],\n"
     "        [1.6667e+01, 1.7000e+01, 1.7333e+01,  ..., 3.2333e+01, 3.2667e+01,\n"
     "         3.3000e+01],\n"
     "        [3.3333e+01, 3.3667e+01, 3.4000e+01,  ..., 4.9000e+01, 4.9333e+01,\n"
     "         4.9667e+01],\n"
     "        ...,\n"
     "        [6.1667e+02, 6.1700e+02, 6.1733e+02,  ..., 6.3233e+02, 6.3267e+02,\n"
     "         6.3300e+02],\n"
     "        [6.3333e+02, 6.3367e+02, 6.3400e+02,  ..., 6.4900e+02, 6.4933e+02,\n"
     "         6.4967e+02],\n"
     "        [6.5000e+02, 6.5033e+02, 6.5067e+02,  ..., 6.6567e+02, 6.6600e+02,\n"
     "         6.6633e+02]], device='sim:0')"},
};

static const ts_opts F32 = {0};
static const ts_opts F64 = {.dtype = TS_F64};

static ts_tensor *vec_f32(int64_t n, const float *v) { return ts_tensor_f32(TS_SHAPE(n), v, F32); }
/* torch.arange(n.).reshape(s) / div, computed in f32 like torch */
static ts_tensor *arange_f32_div(ts_shape s, float div) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)i / div;
    ts_tensor *t = ts_tensor_f32(s, v, F32);
    free(v);
    return t;
}
static ts_tensor *arange_f64_div(ts_shape s, double div, ts_opts o) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (double)i / div;
    o.dtype = TS_F64;
    ts_tensor *t = ts_tensor_f64(s, v, o);
    free(v);
    return t;
}
static ts_tensor *arange_i64(ts_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    return ts_reshape(ts_arange(0, (double)n, 1, (ts_opts){.dtype = TS_I64}), s);
}
static ts_tensor *grad(ts_tensor *t) {
    ts_set_requires_grad(t, true);
    return t;
}

#define IS(s) (strcmp(name, s) == 0)
#define VF(...)                                                                                    \
    vec_f32(sizeof((float[]){__VA_ARGS__}) / sizeof(float), (const float[]){__VA_ARGS__})

static ts_tensor *make_case(const char *name) {
    if (IS("f32_int_mode")) return VF(1, 2, 3);
    if (IS("f32_fixed")) return VF(1.5, -2.25, 3);
    if (IS("f32_rounding")) return VF(12345.678f, 99999.5f, 100.25f);
    if (IS("f32_sci_small")) return VF(1e-5f, 1);
    if (IS("f32_sci_ratio")) return VF(123456.789f, 0.5f);
    if (IS("f32_sci_neg")) return VF(-1e-10f, 3e5f, 0);
    if (IS("int_mode_sci_big")) return VF(1, 1e9f);
    if (IS("int_mode_sci_ratio")) return VF(1, 2000, -3);
    if (IS("int_mode_width")) return VF(1, -100, 7);
    if (IS("nonfinite")) return VF(NAN, INFINITY, -INFINITY, 1);
    if (IS("nan_fixed")) return VF(NAN, 1.5, -NAN);
    if (IS("nan_sci")) return VF(1.5, NAN, 1e9f);
    if (IS("all_zero")) return VF(0, 0);
    if (IS("all_nan")) return VF(NAN, NAN);
    if (IS("neg_zero")) return VF(-0.0f, 1);
    if (IS("f64_fixed")) return ts_tensor_f64(TS_SHAPE(2), (const double[]){0.1, 0.25}, F64);
    if (IS("f64_exp3")) return ts_tensor_f64(TS_SHAPE(2), (const double[]){1e-300, 1}, F64);
    if (IS("f16") || IS("bf16")) {
        ts_tensor *t = ts_tensor_f64(TS_SHAPE(3), (const double[]){1.5, 2, 0.1}, F64);
        return ts_to_dtype(t, IS("f16") ? TS_F16 : TS_BF16);
    }
    if (IS("i64_arange")) return ts_arange(0, 10, 1, (ts_opts){.dtype = TS_I64});
    if (IS("i64_width"))
        return ts_tensor_i64(TS_SHAPE(3), (const int64_t[]){-5, 100, 7}, (ts_opts){0});
    if (IS("i64_big"))
        return ts_tensor_i64(TS_SHAPE(2), (const int64_t[]){((int64_t)1 << 62) + 1, -1},
                             (ts_opts){0});
    if (IS("i32"))
        return ts_tensor_i32(TS_SHAPE(3), (const int32_t[]){1, 2, 3}, (ts_opts){.dtype = TS_I32});
    if (IS("u8"))
        return ts_from_data(TS_SHAPE(3), TS_U8, (const uint8_t[]){0, 255, 7},
                            (ts_opts){.dtype = TS_U8});
    if (IS("bool"))
        return ts_from_data(TS_SHAPE(3), TS_BOOL, (const bool[]){true, false, true},
                            (ts_opts){.dtype = TS_BOOL});
    if (IS("scalar_f32")) return ts_scalar(3, F32);
    if (IS("scalar_f64")) return ts_scalar(-2.5, F64);
    if (IS("scalar_i64")) return ts_scalar(7, (ts_opts){.dtype = TS_I64});
    if (IS("scalar_bool")) return ts_scalar(1, (ts_opts){.dtype = TS_BOOL});
    if (IS("scalar_nan")) return ts_scalar(NAN, F32);
    if (IS("empty_1d")) return ts_zeros(TS_SHAPE(0), F32);
    if (IS("empty_2d")) return ts_zeros(TS_SHAPE(0, 3), F32);
    if (IS("empty_3d_i64")) return ts_zeros(TS_SHAPE(2, 0, 4), (ts_opts){.dtype = TS_I64});
    if (IS("empty_bool")) return ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_BOOL});
    if (IS("mat_2x3")) return arange_f32_div(TS_SHAPE(2, 3), 1);
    if (IS("mat_2x3x4")) return arange_f32_div(TS_SHAPE(2, 3, 4), 4);
    if (IS("mat_4d_int")) return arange_i64(TS_SHAPE(2, 2, 2, 2));
    if (IS("transposed")) return ts_t(arange_f32_div(TS_SHAPE(2, 3), 1));
    if (IS("strided_slice")) return ts_slice(arange_i64(TS_SHAPE(10)), 0, 0, 10, 3);
    if (IS("sum_1d")) return arange_i64(TS_SHAPE(2000));
    if (IS("sum_2d_sci")) return arange_f32_div(TS_SHAPE(40, 50), 1);
    if (IS("sum_3d")) return arange_f32_div(TS_SHAPE(10, 11, 10), 7);
    if (IS("sum_transposed")) return ts_t(arange_f32_div(TS_SHAPE(40, 50), 1));
    if (IS("sum_expanded")) return ts_expand(VF(1, -2, 3.5), TS_SHAPE(500, 3));
    if (IS("sum_rows_only_cols")) return arange_f32_div(TS_SHAPE(2, 1000), 1000);
    if (IS("wrap_f64")) return arange_f64_div(TS_SHAPE(30), 29, F64);
    if (IS("wrap_int")) return arange_i64(TS_SHAPE(100));
    if (IS("wrap_2d")) return arange_f32_div(TS_SHAPE(2, 20), 3);
    if (IS("grad")) return ts_ones(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    if (IS("grad_f64"))
        return ts_tensor_f64(TS_SHAPE(2), (const double[]){1, 2},
                             (ts_opts){.dtype = TS_F64, .requires_grad = true});
    if (IS("suffix_wrap")) return grad(arange_f64_div(TS_SHAPE(16), 3, F64));
    if (IS("suffix_wrap_2d")) return arange_f64_div(TS_SHAPE(2, 6), 3, F64);
    if (IS("opt_precision")) return VF(1.12345f, 2.5);
    if (IS("opt_precision0")) return VF(1.5, 2.5, -3.25);
    if (IS("opt_threshold")) return arange_i64(TS_SHAPE(10));
    if (IS("opt_edgeitems")) return arange_i64(TS_SHAPE(4, 6));
    if (IS("opt_linewidth")) return arange_f32_div(TS_SHAPE(30), 7);
    if (IS("sim_f32")) return ts_to(VF(1, 2), ts_sim(0));
    if (IS("sim_i32")) return ts_arange(0, 3, 1, (ts_opts){.dtype = TS_I32, .device = ts_sim(1)});
    if (IS("sim_empty")) return ts_zeros(TS_SHAPE(0, 3), (ts_opts){.device = ts_sim(0)});
    if (IS("sim_scalar")) return ts_to(ts_scalar(2.5, F32), ts_sim(3));
    if (IS("sim_grad"))
        return ts_zeros(TS_SHAPE(2, 2), (ts_opts){.device = ts_sim(0), .requires_grad = true});
    if (IS("sim_wrap")) return arange_f64_div(TS_SHAPE(16), 3, (ts_opts){.device = ts_sim(2)});
    if (IS("sim_summarized")) return ts_to(arange_f32_div(TS_SHAPE(40, 50), 3), ts_sim(0));
    return NULL;
}

static int64_t live(ts_device d) {
    ts_mem_stats s = {0};
    ts_memory_stats(d, &s);
    return s.live_tensors;
}

static void test_cases(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const pcase *c = &CASES[i];
        ts_scope_begin();
        ts_tensor *t = make_case(c->name);
        if (!t) {
            ts_test_failf(__FILE__, __LINE__, "case %s: could not build the tensor%s", c->name,
                          ts_test_error_str());
            ts_test_record(false);
            ts_error_clear();
            ts_scope_end();
            continue;
        }
        CHECK_EQ(ts_print_options(c->precision, c->threshold, c->edgeitems, c->linewidth), TS_OK);
        int64_t live_cpu = live(ts_cpu()), live_dev = live(ts_device_of(t));
        int depth = ts_scope_depth();
        char *s = ts_to_string(t);
        CHECK_OK();
        /* printing leaves no tensors behind, in the scope or anywhere else */
        CHECK_EQ(live(ts_cpu()), live_cpu);
        CHECK_EQ(live(ts_device_of(t)), live_dev);
        CHECK_EQ(ts_scope_depth(), depth);
        bool ok = s && strcmp(s, c->expected) == 0;
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "case %s:\n  got:      %s\n  expected: %s", c->name,
                          s ? s : "(null)", c->expected);
        free(s);
        ts_print_options(4, 1000, 3, 80);
        ts_scope_end();
    }
}

/* ts_print writes the same text plus a newline to stdout. */
static void test_print_stdout(void) {
    ts_scope_begin();
    ts_tensor *t = arange_f32_div(TS_SHAPE(2, 3), 1);
    char *expected = ts_to_string(t);
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    if (tmp && expected) {
        fflush(stdout);
        int saved = dup(fileno(stdout));
        dup2(fileno(tmp), fileno(stdout));
        ts_print(t);
        ts_print(NULL);
        fflush(stdout);
        dup2(saved, fileno(stdout));
        close(saved);
        char got[256] = {0};
        rewind(tmp);
        size_t n = fread(got, 1, sizeof got - 1, tmp);
        char want[256];
        snprintf(want, sizeof want, "%s\ntensor(NULL)\n", expected);
        CHECK_EQ(n, strlen(want));
        CHECK_STREQ(got, want);
        fclose(tmp);
    }
    free(expected);
    CHECK_OK();
    ts_scope_end();
}

static void test_edge_api(void) {
    /* NULL prints as such and is not an error */
    char *s = ts_to_string(NULL);
    CHECK_STREQ(s, "tensor(NULL)");
    free(s);
    CHECK_OK();
    /* bad options are rejected and leave the old ones in place */
    CHECK_EQ(ts_print_options(-1, 1000, 3, 80), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_print_options(4, -1, 3, 80), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_print_options(4, 1000, 0, 80), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_print_options(4, 1000, 3, 0), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_begin();
    s = ts_to_string(VF(1.12345f));
    CHECK_STREQ(s, "tensor([1.1235])"); /* torch.tensor([1.12345]) with the defaults */
    free(s);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 4) return ts_test_skip("needs TS_SIM_DEVICES=4");
    test_cases();
    test_print_stdout();
    test_edge_api();
    return ts_test_finish();
}
