/* bench_conv_formats.c — oneDNN's own convolutions on the ResNet-18 CIFAR shapes (batch 64, 3x3,
 * stride 1, the four stages' widths), with the activations in the channel-blocked layout oneDNN
 * picks (nChw16c: what Tessera's NCHW tensors are reordered into and out of at every call) and
 * in NHWC (channels_last, which oneDNN's kernels read and write as they are): forward, backward
 * data and backward weights, the kernels oneDNN chose, and the two reorders per activation that
 * the blocked layout costs Tessera. Measures oneDNN, not Tessera: whether keeping activations in
 * NHWC between layers (PyTorch's channels_last) would take the reorders away without slower
 * convolutions on this host (bench/results/resnet.md). One thread unless OMP_NUM_THREADS says
 * otherwise. Usage: bench_conv_formats [f32|bf16] (bf16 only where oneDNN has native bf16
 * kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_conv_formats"
#include "bench_util.h"

#ifndef TS_HAVE_DNNL
int main(void) {
    printf("%s: built without oneDNN\n", BENCH_NAME);
    return 0;
}
#else
#include <dnnl.h>

#define CHECK_DNNL(call)                                                                           \
    do {                                                                                           \
        if ((call) != dnnl_success) {                                                              \
            fprintf(stderr, "%s: %s failed\n", BENCH_NAME, #call);                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t st;

static dnnl_memory_t mem(const dnnl_memory_desc_t *md) {
    dnnl_memory_t m;
    CHECK_DNNL(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    void *p;
    CHECK_DNNL(dnnl_memory_get_data_handle(m, &p));
    memset(p, 0, dnnl_memory_desc_get_size(md)); /* touched, and no NaN to slow anything */
    return m;
}

/* ms: the best of 6 runs after 2 warm-up ones */
static double time_prim(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args) {
    double best = 1e30;
    for (int i = 0; i < 8; i++) {
        const double t0 = now_s();
        CHECK_DNNL(dnnl_primitive_execute(p, st, nargs, args));
        CHECK_DNNL(dnnl_stream_wait(st));
        const double dt = (now_s() - t0) * 1e3;
        if (i >= 2 && dt < best) best = dt;
    }
    return best;
}

static const char *impl(const_dnnl_primitive_desc_t pd) {
    const char *s = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s ? s : "?";
}

static double reorder_ms(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t r;
    CHECK_DNNL(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
    CHECK_DNNL(dnnl_primitive_create(&r, pd));
    dnnl_memory_t a = mem(from), b = mem(to);
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    const double t = time_prim(r, 2, args);
    dnnl_primitive_destroy(r), dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(a), dnnl_memory_destroy(b);
    return t;
}

typedef struct conv_ms {
    double fwd, bwd_data, bwd_weights, reorders;
} conv_ms;

/* one stage's convolution, activations as nhwc (true) or as oneDNN likes (any) */
static conv_ms run(dnnl_data_type_t dt, int64_t c, int64_t hw, bool nhwc) {
    const int64_t n = 64;
    const dnnl_dims_t xd = {n, c, hw, hw}, wd = {c, c, 3, 3}, strides = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t x_md, w_md, plain;
    CHECK_DNNL(
        dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dt, nhwc ? dnnl_nhwc : dnnl_format_tag_any));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&w_md, 4, wd, dt, dnnl_format_tag_any));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&plain, 4, xd, dt, dnnl_nchw));
    dnnl_convolution_desc_t fd, bd, wdsc;
    dnnl_primitive_desc_t fpd, bpd, wpd;
    CHECK_DNNL(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                  dnnl_convolution_direct, &x_md, &w_md, NULL,
                                                  &x_md, strides, pad, pad));
    CHECK_DNNL(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
    CHECK_DNNL(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x_md, &w_md,
                                                        &x_md, strides, pad, pad));
    CHECK_DNNL(dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd));
    CHECK_DNNL(dnnl_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &x_md,
                                                           &w_md, NULL, &x_md, strides, pad, pad));
    CHECK_DNNL(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, eng, fpd));
    dnnl_primitive_t f, b, w;
    CHECK_DNNL(dnnl_primitive_create(&f, fpd));
    CHECK_DNNL(dnnl_primitive_create(&b, bpd));
    CHECK_DNNL(dnnl_primitive_create(&w, wpd));
    const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
    dnnl_memory_t x = mem(src), y = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0)),
                  wt = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0));
    dnnl_memory_t gy = mem(dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_dst_md, 0)),
                  gx = mem(dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_src_md, 0)),
                  wb = mem(dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0));
    dnnl_memory_t xw = mem(dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0)),
                  gyw = mem(dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0)),
                  gw = mem(dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_weights_md, 0));
    conv_ms r;
    r.fwd = time_prim(
        f, 3, (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, y}});
    r.bwd_data =
        time_prim(b, 3,
                  (dnnl_exec_arg_t[]){
                      {DNNL_ARG_DIFF_DST, gy}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DIFF_SRC, gx}});
    r.bwd_weights =
        time_prim(w, 3,
                  (dnnl_exec_arg_t[]){
                      {DNNL_ARG_DIFF_DST, gyw}, {DNNL_ARG_SRC, xw}, {DNNL_ARG_DIFF_WEIGHTS, gw}});
    /* the blocked layout from NCHW tensors: one reorder in, one out (each direction) */
    r.reorders = nhwc ? 0 : reorder_ms(&plain, src) + reorder_ms(src, &plain);
    printf("  C %3lld %2lldx%-2lld %-7s fwd %7.2f ms (%s)  bwd data %7.2f (%s)  bwd weights %7.2f "
           "(%s)",
           (long long)c, (long long)hw, (long long)hw, nhwc ? "nhwc" : "blocked", r.fwd, impl(fpd),
           r.bwd_data, impl(bpd), r.bwd_weights, impl(wpd));
    if (!nhwc) printf("  reorder in + out %.2f ms", r.reorders);
    printf("\n");
    dnnl_memory_t all[] = {x, y, wt, gy, gx, wb, xw, gyw, gw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dnnl_memory_destroy(all[i]);
    dnnl_primitive_destroy(f), dnnl_primitive_destroy(b), dnnl_primitive_destroy(w);
    dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(bpd),
        dnnl_primitive_desc_destroy(wpd);
    return r;
}

int main(int argc, char **argv) {
    const bool bf16 = argc > 1 && !strcmp(argv[1], "bf16");
    if (bf16 && dnnl_get_effective_cpu_isa() < dnnl_cpu_isa_avx512_core_bf16) {
        printf("%s: oneDNN has no native bf16 kernels on this CPU (its bf16 would be emulated)\n",
               BENCH_NAME);
        return 0;
    }
    CHECK_DNNL(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    const dnnl_version_t *v = dnnl_version();
    printf("oneDNN %d.%d.%d, %s convolutions, batch 64, 3x3 stride 1 (ResNet-18 CIFAR's stages)\n",
           v->major, v->minor, v->patch, bf16 ? "bf16" : "float32");
    static const int64_t stages[][2] = {{64, 32}, {128, 16}, {256, 8}, {512, 4}};
    double tot[2] = {0, 0}, reorders = 0;
    for (int s = 0; s < 4; s++)
        for (int l = 0; l < 2; l++) {
            const conv_ms r = run(bf16 ? dnnl_bf16 : dnnl_f32, stages[s][0], stages[s][1], l == 1);
            tot[l] += r.fwd + r.bwd_data + r.bwd_weights;
            reorders += r.reorders;
        }
    printf("sum over the four shapes: blocked %.1f ms + reorders %.1f ms (one in and one out per\n"
           "conv; a training step pays several per conv), nhwc %.1f ms: nhwc / blocked = %.3f\n",
           tot[0], reorders, tot[1], tot[1] / tot[0]);
    dnnl_stream_destroy(st), dnnl_engine_destroy(eng);
    return 0;
}
#endif
