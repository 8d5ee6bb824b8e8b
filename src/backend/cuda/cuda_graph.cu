/* cuda_graph.cu — captured steps as CUDA graphs (backend.h: graph_build, graph_launch,
 * graph_destroy; docs/CAPTURE.md). The core records a step's kernel calls; at the end of the
 * capture they run once here under a stream capture on a side stream, and the graph is
 * instantiated once; each replay is then one cudaGraphLaunch on the thread's current stream.
 *
 * The capture is relaxed (cudaStreamCaptureModeRelaxed, as PyTorch's): while it lasts, the
 * kernels' scratch memory (workspaces, tables) is cudaMalloc'd for the graph, which keeps it until
 * it is destroyed. The graph's nodes run in the order they were captured (one stream), so a
 * scratch block freed by one kernel serves a later one, as the caching allocator serves the eager
 * step. A table (the optimizer's, the grad scaler's) is uploaded once into a block of its own
 * (tsc_table_alloc), which no other kernel ever uses. Random draws
 * read their Philox seed and base from the graph's counters, which each launch sets first. */
#include <stdlib.h>

#include "backend/cuda/cuda_device.h"

struct graph_block {
    void *ptr;
    size_t size;
    bool free;  /* released by its kernel: a later kernel of the capture may take it */
    bool table; /* a table's (tsc_graph_table_alloc): uploaded once, read by every launch, never
                   reused, and never a block an earlier kernel of the graph writes */
};

struct tsc_graph {
    int device;
    cudaGraphExec_t exec;
    uint64_t *counters; /* device: {seed, base} of the launch in flight */
    bool draws;         /* some kernel reads the counters */
    graph_block *blocks;
    size_t n, cap;
};

/* the graph this thread builds now */
static thread_local tsc_graph *tl_building;

static tsc_graph *building_on(int index) {
    tsc_graph *g = tl_building;
    return g && g->device == index ? g : nullptr;
}

bool tsc_graph_capturing(int index) { return building_on(index) != nullptr; }

const uint64_t *tsc_graph_counters(int index) {
    tsc_graph *g = building_on(index);
    if (!g) return nullptr;
    g->draws = true;
    return g->counters;
}

/* a block of the graph's own (cudaMalloc: the relaxed capture allows it), in use */
static void *new_block(tsc_graph *g, int index, size_t nbytes, bool table) {
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        graph_block *nb = (graph_block *)realloc(g->blocks, cap * sizeof *nb);
        if (!nb) {
            tsi_error_set(TS_ERR_OOM, "cuda graph capture: out of host memory");
            return nullptr;
        }
        g->blocks = nb, g->cap = cap;
    }
    void *p = nullptr;
    const size_t size = nbytes ? (nbytes + 511) & ~(size_t)511 : 512;
    if (!tsc_check(cudaMalloc(&p, size), "cuda graph capture: scratch memory (cudaMalloc)", index))
        return nullptr;
    g->blocks[g->n++] = graph_block{p, size, false, table};
    return p;
}

void *tsc_graph_scratch_alloc(int index, size_t nbytes, bool *handled) {
    tsc_graph *g = building_on(index);
    *handled = g != nullptr;
    if (!g) return nullptr;
    /* best fit among the blocks an earlier kernel of the capture released, at most twice the
     * request (a small request does not pin a large workspace) */
    graph_block *best = nullptr;
    for (size_t i = 0; i < g->n; i++) {
        graph_block *b = &g->blocks[i];
        if (!b->free || b->size < nbytes || b->size / 2 > nbytes) continue;
        if (!best || b->size < best->size) best = b;
    }
    if (best) {
        best->free = false;
        return best->ptr;
    }
    return new_block(g, index, nbytes, false);
}

void *tsc_graph_table_alloc(int index, size_t nbytes, bool *handled) {
    tsc_graph *g = building_on(index);
    *handled = g != nullptr;
    return g ? new_block(g, index, nbytes, true) : nullptr;
}

static graph_block *block_of(tsc_graph *g, const void *p) {
    for (size_t i = 0; g && i < g->n; i++)
        if (g->blocks[i].ptr == p) return &g->blocks[i];
    return nullptr;
}

bool tsc_graph_scratch_free(int index, void *p) {
    graph_block *b = block_of(building_on(index), p);
    if (!b) return false;
    if (!b->table) b->free = true;
    return true;
}

bool tsc_graph_table_h2d(int index, void *dst, const void *src, size_t n, const char *what,
                         bool *handled) {
    tsc_graph *g = building_on(index);
    *handled = g != nullptr;
    if (!g) return false;
    /* Uploaded now and once, outside the capture (the relaxed mode allows it; the capture stream
     * does not wait for the legacy stream, being non-blocking), so every launch reads these
     * values: only into a table's own block. A block that served an earlier kernel as scratch
     * would be overwritten by that kernel at each launch (the optimizer then read pointers out
     * of a convolution's workspace: an illegal address on the first replay). */
    const graph_block *b = block_of(g, dst);
    if (!b || !b->table) {
        tsi_error_set(TS_ERR_STATE,
                      "%s: the table's memory is not a table block of the graph being captured "
                      "(tsc_table_alloc)",
                      what);
        return false;
    }
    return tsc_check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), what, index);
}

static void graph_free(tsc_graph *g) {
    if (!g) return;
    if (g->exec) (void)cudaGraphExecDestroy(g->exec);
    for (size_t i = 0; i < g->n; i++) (void)cudaFree(g->blocks[i].ptr);
    if (g->counters) (void)cudaFree(g->counters);
    free(g->blocks);
    free(g);
}

static void *graph_build(const ts_backend *be, int index, void (*body)(void *ctx), void *ctx) {
    (void)be;
    if (!tsc_set_device(index)) return nullptr;
    tsc_graph *g = (tsc_graph *)calloc(1, sizeof *g);
    if (!g) {
        tsi_error_set(TS_ERR_OOM, "graph_capture_end: out of host memory");
        return nullptr;
    }
    g->device = index;
    if (!tsc_check(cudaMalloc(&g->counters, 2 * sizeof(uint64_t)),
                   "graph_capture_end: the graph's random counters (cudaMalloc)", index)) {
        graph_free(g);
        return nullptr;
    }
    /* a side stream of the pool (non-blocking: the legacy stream never joins the capture),
     * current for this thread while the calls run */
    ts_cuda_stream *prev = tsc_stream_obj(index);
    ts_cuda_stream *side = ts_cuda_stream_new(index);
    if (!side) {
        graph_free(g);
        return nullptr;
    }
    (void)ts_cuda_set_stream(side);
    cudaGraph_t graph = nullptr;
    if (tsc_check(cudaStreamBeginCapture(side->handle, cudaStreamCaptureModeRelaxed),
                  "graph_capture_end: cudaStreamBeginCapture", index)) {
        tl_building = g;
        body(ctx);
        tl_building = nullptr;
        const cudaError_t e = cudaStreamEndCapture(side->handle, &graph);
        /* the first error wins: a kernel's, which broke the capture, before the capture's own */
        tsc_check(e, "graph_capture_end: cudaStreamEndCapture", index);
    }
    (void)ts_cuda_set_stream(prev);
    (void)ts_cuda_stream_free(side);
    if (graph && !ts_error())
        tsc_check(cudaGraphInstantiate(&g->exec, graph, 0),
                  "graph_capture_end: cudaGraphInstantiate", index);
    if (graph) (void)cudaGraphDestroy(graph);
    if (ts_error()) {
        graph_free(g);
        return nullptr;
    }
    return g;
}

__global__ void set_counters(uint64_t *c, uint64_t seed, uint64_t base) {
    c[0] = seed;
    c[1] = base;
}

static bool graph_launch(const ts_backend *be, int index, void *graph, uint64_t seed,
                         uint64_t base) {
    (void)be;
    tsc_graph *g = (tsc_graph *)graph;
    if (!tsc_set_device(index)) return false;
    cudaStream_t st = tsc_stream(index);
    if (g->draws) { /* by value, so the next launch's may follow at once */
        set_counters<<<1, 1, 0, st>>>(g->counters, seed, base);
        if (!tsc_launch_check("graph_replay: the random counters", index)) return false;
    }
    return tsc_check(cudaGraphLaunch(g->exec, st), "graph_replay: cudaGraphLaunch", index);
}

static void graph_destroy(const ts_backend *be, int index, void *graph) {
    (void)be;
    if (!graph) return;
    /* launches in flight read and write memory that goes back below */
    if (tsc_set_device(index)) (void)tsc_check(cudaDeviceSynchronize(), "graph_free", index);
    graph_free((tsc_graph *)graph);
}

void tsc_install_graph(ts_backend *be) {
    be->graph_build = graph_build;
    be->graph_launch = graph_launch;
    be->graph_destroy = graph_destroy;
}
