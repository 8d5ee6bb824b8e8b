/* test_placement.c — ts_module_place (issue 55, part 3): budget strings, a Sequential and a GPT
 * placed across sim:0 / sim:1 / cpu give the unplaced cpu run's outputs and gradients bit for bit
 * (sim runs the cpu kernels: same kernels, same order), every budget holds, a budget too small is
 * a clear error that moves nothing, a model too large for the capped sim device fails plainly and
 * runs once placed, and an allocation-failure sweep over the placement leaks nothing. */
#include "fault_sweep.h"
#include "placement_test_util.h"

/* ------------------------------------------------------------------ budgets */
static void test_parse(void) {
    ts_mem_budget b[4];
    int n = -1;
    CHECK_EQ(ts_mem_budget_parse("sim:0=2MiB,sim:1=1.5KiB,cpu=64GB", b, 4, &n), TS_OK);
    CHECK_EQ(n, 3);
    CHECK(ts_device_equal(b[0].device, ts_sim(0)) && ts_device_equal(b[2].device, ts_cpu()));
    CHECK_EQ(b[0].bytes, 2 << 20);
    CHECK_EQ(b[1].bytes, 1536);
    CHECK_EQ(b[2].bytes, 64000000000LL);
    CHECK_EQ(ts_mem_budget_parse("cpu=100", b, 4, &n), TS_OK);
    CHECK_EQ(b[0].bytes, 100);
    CHECK_EQ(ts_mem_budget_parse("cpu=3KB", b, 4, &n), TS_OK);
    CHECK_EQ(b[0].bytes, 3000);
    static const struct {
        const char *s, *frag;
    } bad[] = {
        {"", "empty budget list"},
        {"sim:0=1MiB,,cpu=1GiB", "empty entry"},
        {"sim:0", "has no '='"},
        {"sim:9=1MiB", "unknown device 'sim:9'"},
        {"gpu=1MiB", "unknown device 'gpu'"},
        {"sim:0=2XB", "bad size '2XB' for sim:0"},
        {"sim:0=-1", "bad size"},
        {"sim:0=MiB", "bad size"},
        {"sim:0=1mib", "bad size"},
        {"sim:0=1MiB,sim:0=2MiB", "sim:0 is given twice"},
        {"sim:0=1,sim:1=1,sim:2=1,sim:3=1,cpu=1", "more than 4 budgets"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(ts_mem_budget_parse(bad[i].s, b, 4, &n), TS_ERR_ARG);
        CHECK_ERR_HAS(TS_ERR_ARG, bad[i].frag);
        CHECK_EQ(n, 0);
    }
}

/* ------------------------------------------------------------------ plans */
static int budget_index(const ts_place_plan *p, ts_device d) {
    for (int k = 0; k < p->n_devices; k++)
        if (ts_device_equal(p->budgets[k].device, d)) return k;
    return -1;
}

/* every budget holds, the per-device totals add up, devices are filled in budget order and never
 * revisited */
static void check_plan(const ts_place_plan *p) {
    for (int i = 0; i < p->n_devices; i++) CHECK(p->used[i].bytes <= p->budgets[i].bytes);
    size_t sum = 0, used = 0;
    for (int i = 0; i < p->n_units; i++) {
        sum += p->units[i].param_bytes + p->units[i].act_bytes;
        CHECK(budget_index(p, p->units[i].device) >= 0);
        if (i)
            CHECK(budget_index(p, p->units[i].device) >= budget_index(p, p->units[i - 1].device));
    }
    for (int i = 0; i < p->n_devices; i++) used += p->used[i].bytes;
    CHECK_EQ(sum, used);
}

static void test_sequential(void) {
    ts_tensor *x = ts_randn(TS_SHAPE(4, 32), (ts_opts){0});
    ts_module *ref = mlp_new(), *m = mlp_new();
    run want = forward_backward(ref, x);
    /* two hidden Linears fit each sim device; the rest goes to the cpu */
    ts_place_plan p;
    CHECK_EQ(ts_module_place_str(m, "sim:0=9000,sim:1=9000,cpu=1GiB", (ts_place_opts){0}, &p),
             TS_OK);
    CHECK_EQ(p.n_units, 13);
    CHECK(ts_device_equal(p.units[0].device, ts_sim(0)) &&
          ts_device_equal(p.units[3].device, ts_sim(0)));
    CHECK(ts_device_equal(p.units[4].device, ts_sim(1)) &&
          ts_device_equal(p.units[12].device, ts_cpu()));
    CHECK_EQ(p.units[0].param_bytes, 4224);
    CHECK_EQ(p.used[0].bytes, 8448);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "0.weight")), ts_sim(0)));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "4.bias")), ts_sim(1)));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "12.weight")), ts_cpu()));
    check_plan(&p);
    char *s = ts_place_plan_str(&p);
    CHECK(s && strstr(s, "sim:0: 8.25 KiB of 8.79 KiB\nsim:1: 8.25 KiB of 8.79 KiB\n"));
    free(s);
    ts_place_plan_free(&p);
    check_same(want, forward_backward(m, x), "Sequential");

    /* activations for an example input are charged too: less fits on each device */
    CHECK_EQ(ts_module_place_str(m, "sim:0=10000,sim:1=10000,cpu=1GiB",
                                 (ts_place_opts){.example_input = x, .with_grads = true}, &p),
             TS_OK);
    CHECK_EQ(p.units[0].param_bytes, 2 * 4224);
    CHECK_EQ(p.units[0].act_bytes, 4 * 32 * 4);
    /* Linear 8448 + 512, ReLU 0 + 512: a Linear and a ReLU per device */
    CHECK(ts_device_equal(p.units[1].device, ts_sim(0)) &&
          ts_device_equal(p.units[2].device, ts_sim(1)) &&
          ts_device_equal(p.units[3].device, ts_sim(1)) &&
          ts_device_equal(p.units[4].device, ts_cpu()));
    check_plan(&p);
    ts_place_plan_free(&p);
    /* the earlier placement's hooks are gone: the grads accumulate, the values still agree */
    for (int i = 0; i < 2; i++) {
        ts_tensor_list ps = ts_module_named_parameters(i ? m : ref);
        for (int k = 0; k < ps.n; k++) ts_set_grad(ps.tensors[k], NULL);
        ts_tensor_list_free(&ps);
    }
    check_same(forward_backward(ref, x), forward_backward(m, x), "Sequential, placed again");

    /* too small: a clear error naming the devices and sizes, nothing moved */
    ts_module *small = mlp_new();
    CHECK_EQ(ts_module_place_str(small, "sim:0=5000,cpu=8KiB", (ts_place_opts){0}, &p), TS_ERR_OOM);
    CHECK_ERR_HAS(TS_ERR_OOM, "the budgets cannot hold the model: the model needs 25.27 KiB");
    CHECK(p.n_units == 0 && p.units == NULL);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(small, "0.weight")), ts_cpu()));
    CHECK_EQ(ts_module_place_str(small, "sim:0=5000,cpu=8KiB", (ts_place_opts){0}, NULL),
             TS_ERR_OOM);
    const char *msg = ts_error_message();
    CHECK(strstr(msg, "sim:0=4.88 KiB (4.12 KiB planned), cpu=8.00 KiB (4.12 KiB planned)"));
    ts_error_clear();
    ts_module_place(NULL, NULL, 0, (ts_place_opts){0}, NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "module_place: module is NULL");
    ts_module_place(small, NULL, 0, (ts_place_opts){0}, NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "no budgets");
    ts_module_place(ts_module_child(small, "0"), &(ts_mem_budget){ts_cpu(), 1 << 20}, 1,
                    (ts_place_opts){0}, NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "is a child module");
    ts_module_free(small);
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(x);
}

static void test_gpt(void) {
    ts_tensor *idx = ts_randint(0, 16, TS_SHAPE(2, 8), (ts_opts){.dtype = TS_I64});
    ts_module *ref = gpt_new(), *m = gpt_new();
    run want = forward_backward(ref, idx);
    ts_place_plan p;
    /* embeddings 1536 B + 1024 B output, blocks 13120 B + 1024 B: the embeddings and one block on
     * sim:0, a block on sim:1, the rest on the cpu */
    CHECK_EQ(ts_module_place_str(m, "sim:0=20KiB,sim:1=20KiB,cpu=1GiB",
                                 (ts_place_opts){.example_input = idx, .output_device = ts_cpu()},
                                 &p),
             TS_OK);
    CHECK(m->training && ts_module_child(m, "blocks.1")->training); /* measured in eval, restored */
    CHECK_EQ(p.n_units, 5);
    CHECK_STREQ(p.units[0].name, "tok_emb+pos_emb+drop");
    CHECK_STREQ(p.units[4].name, "ln_f");
    CHECK(ts_device_equal(p.units[0].device, ts_sim(0)) &&
          ts_device_equal(p.units[2].device, ts_sim(1)) &&
          ts_device_equal(p.units[3].device, ts_cpu()));
    check_plan(&p);
    ts_place_plan_free(&p);
    ts_scope_begin(); /* the logits leave the tied head on sim:0; output_device brings them back */
    CHECK(ts_device_equal(ts_device_of(ts_forward(m, idx)), ts_cpu()));
    ts_scope_end();
    check_same(want, forward_backward(m, idx), "GPT");
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(idx);
}

/* a model 1.4x the capped device (2.75x with its gradients): plain, out of memory; placed
 * over four capped devices, the unlimited run */
/* a ResNet is cut into the children it runs in order: the stem's conv + bn + relu, each block,
 * the pool and the classifier; placed over sim:0, sim:1 and the cpu it gives the unplaced run's
 * output and gradients */
static void test_resnet(void) {
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 1, 8, 8), (ts_opts){0});
    ts_module *ref = resnet_new(), *m = resnet_new();
    run want = forward_backward(ref, x);
    ts_place_plan p;
    CHECK_EQ(ts_module_place_str(m, "cpu=1GiB", (ts_place_opts){.dry_run = true}, &p), TS_OK);
    CHECK_EQ(p.n_units, 1 + 9 + 2);
    if (p.n_units == 12) {
        CHECK_STREQ(p.units[0].name, "conv1..relu");
        CHECK_STREQ(p.units[1].name, "layer1.0");
        CHECK_STREQ(p.units[9].name, "layer3.2");
        CHECK_STREQ(p.units[10].name, "avgpool");
        CHECK_STREQ(p.units[11].name, "fc");
    }
    /* a third of the weights on each sim device, the rest on the cpu */
    const size_t third = (p.used[0].bytes + 2) / 3;
    ts_place_plan_free(&p);
    char budgets[128];
    snprintf(budgets, sizeof budgets, "sim:0=%zu,sim:1=%zu,cpu=1GiB", third, third);
    CHECK_EQ(ts_module_place_str(m, budgets, (ts_place_opts){.output_device = ts_cpu()}, &p),
             TS_OK);
    CHECK(ts_device_equal(p.units[0].device, ts_sim(0)) &&
          ts_device_equal(p.units[p.n_units - 1].device, ts_cpu()));
    CHECK(p.used[0].bytes > 0 && p.used[1].bytes > 0);
    check_plan(&p);
    ts_place_plan_free(&p);
    check_same(want, forward_backward(m, x), "ResNet-20");
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(x);
}

static void test_capped(void) {
    ts_tensor *x = ts_randn(TS_SHAPE(4, 32), (ts_opts){0});
    ts_module *ref = deep_new(), *m = deep_new();
    run want = forward_backward(ref, x);
    ts_module_to(m, ts_sim(0));
    CHECK_ERR_HAS(TS_ERR_OOM, "sim:0");
    ts_module_to(m, ts_cpu());
    CHECK_OK();
    /* nine Linears (with gradients 76032 B) per device */
    CHECK_EQ(ts_module_place_str(m, "sim:0=80KiB,sim:1=80KiB,sim:2=80KiB,sim:3=80KiB",
                                 (ts_place_opts){.with_grads = true}, NULL),
             TS_OK);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "8.weight")), ts_sim(0)));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "9.weight")), ts_sim(1)));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "31.weight")), ts_sim(3)));
    check_same(want, forward_backward(m, x), "capped");
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(x);
}

/* ------------------------------------------------------------------ allocation failures */
static bool sweep_run(void *p) {
    sweep_state *s = p;
    ts_place_plan plan;
    ts_status st = ts_module_place_str(s->m, "sim:0=100,sim:1=1KiB,cpu=1MiB",
                                       (ts_place_opts){.example_input = s->x}, &plan);
    ts_place_plan_free(&plan);
    if (st != TS_OK) return false;
    ts_scope_begin();
    bool ok = ts_forward(s->m, s->x) != NULL;
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

int main(void) {
    if (ts_sim_configure(4, 0) != TS_OK)
        return ts_test_skip("sim devices: %s", ts_test_error_str());
    test_parse();
    test_sequential();
    test_gpt();
    test_resnet();
    /* the capped devices from here on (nothing is left on them) */
    for (int i = 0; i < 4; i++) ts_empty_cache(ts_sim(i));
    if (ts_sim_configure(4, CAP) != TS_OK)
        return ts_test_skip("sim:0..3 capped: %s", ts_test_error_str());
    test_capped();
    ts_fault_sweep(&(ts_sweep_case){.name = "module_place",
                                    .setup = sweep_setup,
                                    .run = sweep_run,
                                    .teardown = sweep_teardown},
                   400);
    return ts_test_finish();
}
