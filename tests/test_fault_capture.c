/* test_fault_capture.c — allocation-failure sweeps (fault_sweep.h) over captured steps
 * (include/tessera/graph.h, docs/CAPTURE.md): a small MLP with SGD + momentum, warmed up eagerly,
 * then, with the k-th allocation failing for k = 1, 2, ...: the static input tensors made, the
 * capture begun, one training step recorded, the capture ended, the batch copied in, two replays
 * and the graph freed — on cpu and sim:0. Every failing allocation must end in a clear error
 * (TS_ERR_OOM naming the op), the broken graph freed, no thread left capturing, nothing leaked
 * (tensors, device bytes; ASan/LSan for host memory), the model and optimizer exactly as before
 * (a capture records, runs nothing), and after ts_error_clear() the whole scenario must succeed,
 * the replays computing what eager steps compute, bit for bit, and the model must train on
 * eagerly. Also a scenario whose graph outlives the step's loss: released before the replays, its
 * memory given back only by the graph's free; and the step under a grad scaler (scale, unscale,
 * the step that skips itself on the device, the scale's update), whose records fail the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000
enum { WARMUP = 3, REPLAYS = 2 };

typedef struct cap_st {
    sweep_trainee t;
    ts_tensor *sx, *sy; /* the static batch the graph reads */
    ts_tensor *loss;    /* the captured step's loss (its value after the replays) */
    ts_grad_scaler *sc; /* with `scaled`: the step's grad scaler */
    size_t base_bytes;  /* device bytes allocated before setup made anything */
} cap_st;

static ts_device dev;
static bool release_early; /* release the captured loss before replaying */
static bool scaled;        /* the step runs under a grad scaler */
/* the eager reference from the warmed-up state: the losses of steps 1..REPLAYS + 1 */
static double ref_loss[REPLAYS + 1];

static size_t allocated(void) {
    ts_mem_stats m = {0};
    ts_memory_stats(dev, &m);
    return m.allocated;
}

/* One training step's computation (eager, or recorded while capturing) on the batch x, y; the
 * loss, kept (a static output when captured). */
static ts_tensor *train_step(cap_st *s, ts_tensor *x, ts_tensor *y) {
    ts_scope_begin();
    ts_optim_zero_grad(s->t.o);
    /* times a value from the host: in a capture, a block the graph keeps (tsi_capture_const) */
    const float one = 1.0f;
    ts_tensor *loss = ts_mul(ts_cross_entropy(ts_forward(s->t.m, x), y),
                             ts_from_data(TS_SHAPE(1), TS_F32, &one, (ts_opts){.device = dev}));
    if (s->sc) {
        ts_backward(ts_grad_scaler_scale(s->sc, loss));
        ts_grad_scaler_step(s->sc, s->t.o, NULL);
        ts_grad_scaler_update(s->sc);
    } else {
        ts_backward(loss);
        ts_optim_step(s->t.o);
    }
    ts_tensor *kept = ts_keep(loss);
    ts_scope_end();
    return kept;
}

/* an eager step's loss */
static double eager_loss(cap_st *s) {
    ts_tensor *loss = train_step(s, s->t.x, s->t.y);
    double l = ts_item(loss);
    ts_release(loss);
    return l;
}

static void *cap_setup(void) {
    cap_st *s = calloc(1, sizeof *s);
    s->base_bytes = allocated();
    s->t.m = sweep_mlp_new(dev);
    s->t.o = ts_sgd_new(s->t.m, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3});
    if (scaled) s->sc = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024});
    sweep_batch_new(dev, &s->t.x, &s->t.y);
    for (int i = 0; i < WARMUP; i++) eager_loss(s);
    CHECK_OK();
    return s;
}

static void cap_teardown(void *p) {
    cap_st *s = p;
    ts_release(s->loss), ts_release(s->sx), ts_release(s->sy);
    ts_optim_free(s->t.o);
    ts_grad_scaler_free(s->sc);
    ts_module_free(s->t.m);
    ts_release(s->t.x), ts_release(s->t.y);
    /* everything the capture took went back: the graph's pool, the step's tensors */
    size_t left = allocated();
    if (left != s->base_bytes)
        fprintf(stderr, "  %s: %zu bytes allocated after teardown, %zu before setup\n",
                ts_device_str(dev), left, s->base_bytes);
    CHECK_EQ(left, s->base_bytes);
    free(s);
}

/* The user's code of docs/CAPTURE.md, with its error handling: on any failure the graph is freed
 * and what was made is released, and false is returned with the error pending. */
static bool cap_run(void *p) {
    cap_st *s = p;
    ts_release(s->loss), ts_release(s->sx), ts_release(s->sy); /* a run after a failed one */
    s->loss = s->sx = s->sy = NULL;
    ts_scope_begin();
    s->sx = ts_keep(ts_empty_like(s->t.x));
    s->sy = ts_keep(ts_empty_like(s->t.y));
    ts_scope_end();
    if (ts_error()) return false;
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    if (!g) return false;
    s->loss = train_step(s, s->sx, s->sy);
    if (ts_graph_capture_end() != TS_OK) {
        ts_graph_free(g);
        return false;
    }
    if (release_early) { /* made in the capture: the graph keeps its memory, the replays write it */
        ts_release(s->loss);
        s->loss = NULL;
    }
    ts_scope_begin();
    ts_copy_(s->sx, s->t.x);
    ts_copy_(s->sy, s->t.y);
    ts_scope_end();
    for (int r = 0; r < REPLAYS && !ts_error(); r++) ts_graph_replay(g);
    ts_graph_free(g);
    return ts_error() == TS_OK;
}

/* After every run: nothing is left capturing; after a successful one the captured loss is the
 * eager step's, bit for bit, and the model trains on eagerly as an eager run would. */
static void cap_check(void *p, bool ok) {
    cap_st *s = p;
    CHECK(!ts_graph_is_capturing());
    if (!ok) return;
    if (s->loss) {
        double l = ts_item(s->loss);
        CHECK(memcmp(&l, &ref_loss[REPLAYS - 1], sizeof l) == 0);
    }
    double l = eager_loss(s);
    CHECK_OK();
    CHECK(memcmp(&l, &ref_loss[REPLAYS], sizeof l) == 0);
}

static ts_snapshot cap_snap(void *p) {
    cap_st *s = p;
    return sweep_trainee_snap(&s->t);
}

static void sweep_capture(const char *name, ts_device d, bool early, bool with_scaler) {
    dev = d, release_early = early, scaled = with_scaler;
    /* the reference: eager steps from the warmed-up state */
    cap_st *s = cap_setup();
    for (int i = 0; i <= REPLAYS; i++) ref_loss[i] = eager_loss(s);
    CHECK_OK();
    CHECK(ref_loss[REPLAYS] < ref_loss[0]); /* it learns: the steps differ */
    cap_teardown(s);
    ts_sweep_case c = {.name = name,
                       .setup = cap_setup,
                       .run = cap_run,
                       .teardown = cap_teardown,
                       .snap = cap_snap,
                       .check = cap_check};
    ts_sweep_stats st = ts_fault_sweep(&c, MAX_POINTS);
    CHECK(st.allocations > 20); /* the capture's records and memory were counted */
    CHECK(st.oom > 0);
}

/* A block made before the capture and released during it (the recorded calls may still use it,
 * so the graph must keep it), when the pool has no room left to note it: it goes back to the
 * allocator (nothing leaks) and the capture fails, since a replay would write memory that is
 * anyone's; the graph refuses to replay. (A block made in the capture is noted when it is made,
 * so its release needs no room; the first release of the capture is the one that must grow the
 * list.) */
static void check_no_room_in_capture(ts_device d) {
    dev = d;
    ts_scope_begin();
    ts_tensor *a = ts_keep(ts_ones(TS_SHAPE(256), (ts_opts){.device = d}));
    ts_tensor *x = ts_keep(ts_ones(TS_SHAPE(256), (ts_opts){.device = d}));
    size_t before = allocated();
    ts_graph *g = ts_graph_capture_begin(d, (ts_graph_opts){0});
    ts_fault_alloc_set(1); /* the pool's list (empty yet) cannot grow */
    ts_release(x);
    bool fired = ts_fault_alloc_fired();
    ts_fault_alloc_set(-1);
    CHECK(fired);
    CHECK_EQ(allocated(), before - 1024); /* x's block went back */
    CHECK_EQ(ts_graph_capture_end(), TS_ERR_OOM);
    CHECK(strstr(ts_error_message(), "out of host memory keeping the graph's blocks") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_graph_replay(g), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "the capture of this graph failed") != NULL);
    ts_error_clear();
    ts_graph_free(g);
    CHECK_EQ(allocated(), before - 1024);
    ts_release(a);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    sweep_capture("capture+replay cpu", ts_cpu(), false, false);
    sweep_capture("capture, released, cpu", ts_cpu(), true, false);
    sweep_capture("capture, grad scaler, cpu", ts_cpu(), false, true);
    check_no_room_in_capture(ts_cpu());
    if (ts_device_is_available(ts_sim(0))) {
        sweep_capture("capture+replay sim:0", ts_sim(0), false, false);
        sweep_capture("capture, released, sim:0", ts_sim(0), true, false);
        sweep_capture("capture, grad scaler, sim:0", ts_sim(0), false, true);
        check_no_room_in_capture(ts_sim(0));
    }
    return ts_test_finish();
}
