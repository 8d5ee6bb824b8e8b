/* test_placement_override.c — ts_place_opts.overrides (llama.cpp's --override-tensor, issue 55):
 * the tensors a pattern names are stored on its device and charged to its budget, a copy of each
 * is used on its unit's device for the unit's forward, and a Sequential, a GPT (its token
 * embedding, tied to the head, overridden) and a ResNet (a batch norm's running statistics
 * overridden: the forward's update reaches the stored buffers) give the unplaced cpu run's
 * outputs, gradients and buffers bit for bit (sim runs the cpu kernels). Bad rules are clear
 * errors that move nothing; an override device without room is the out-of-memory error; in
 * inference the copies go after each unit, so a model whose weights overflow the capped device
 * runs with them kept on the cpu; placing again without overrides takes the hooks out; an
 * allocation-failure sweep over an overriding placement and a forward leaks nothing. */
#include "fault_sweep.h"
#include "placement_test_util.h"

static bool on(ts_module *m, const char *name, ts_device d) {
    ts_tensor *t = ts_module_get(m, name);
    return t && ts_device_equal(ts_device_of(t), d);
}

/* every budget holds; units and overrides add up to what each device has planned */
static void check_plan(const ts_place_plan *p) {
    for (int i = 0; i < p->n_devices; i++) CHECK(p->used[i].bytes <= p->budgets[i].bytes);
    size_t sum = 0, used = 0;
    for (int i = 0; i < p->n_units; i++) sum += p->units[i].param_bytes + p->units[i].act_bytes;
    for (int i = 0; i < p->n_overrides; i++) sum += p->overrides[i].bytes;
    for (int i = 0; i < p->n_devices; i++) used += p->used[i].bytes;
    CHECK_EQ(sum, used);
}

/* ------------------------------------------------------------------ a Sequential */
static void test_sequential(void) {
    ts_tensor *x = ts_randn(TS_SHAPE(4, 32), (ts_opts){0});
    ts_module *ref = mlp_new(), *m = mlp_new();
    run want = forward_backward(ref, x), want_eval = forward_only(ref, x);
    /* 0.weight (4096 B) kept on the cpu while its unit runs on sim:0; the last Linear (528 B)
     * stored on sim:0, charged there first, while its unit runs on the cpu: sim:0 then holds
     * 0.bias, 2 (and the 528 B), sim:1 Linears 4 and 6, the cpu the rest */
    ts_place_plan p;
    CHECK_EQ(ts_module_place_str(m, "sim:0=9000,sim:1=9000,cpu=1GiB",
                                 (ts_place_opts){.overrides = "^0\\.weight$=cpu,^12\\.=sim:0"}, &p),
             TS_OK);
    CHECK_EQ(p.n_overrides, 3);
    if (p.n_overrides == 3) {
        CHECK_STREQ(p.overrides[0].name, "0.weight");
        CHECK(ts_device_equal(p.overrides[0].device, ts_cpu()) &&
              ts_device_equal(p.overrides[0].used_on, ts_sim(0)));
        CHECK_EQ(p.overrides[0].bytes, 4096);
        CHECK_STREQ(p.overrides[2].name, "12.bias");
        CHECK(ts_device_equal(p.overrides[2].device, ts_sim(0)) &&
              ts_device_equal(p.overrides[2].used_on, ts_cpu()));
    }
    CHECK_EQ(p.units[0].param_bytes, 128);
    CHECK_EQ(p.used[0].bytes, 528 + 128 + 4224);
    CHECK(ts_device_equal(p.units[4].device, ts_sim(1)) &&
          ts_device_equal(p.units[12].device, ts_cpu()));
    check_plan(&p);
    char *s = ts_place_plan_str(&p);
    CHECK(s && strstr(s, "0.weight                 -> cpu      4.00 KiB (override, used on "
                         "sim:0)\n12.weight                -> sim:0    512 B (override, used on "
                         "cpu)\n"));
    CHECK(s && strstr(s, "sim:0: 4.77 KiB of 8.79 KiB\n"));
    free(s);
    ts_place_plan_free(&p);
    CHECK(on(m, "0.weight", ts_cpu()) && on(m, "0.bias", ts_sim(0)));
    CHECK(on(m, "12.weight", ts_sim(0)) && on(m, "10.weight", ts_cpu()));
    CHECK(on(m, "4.weight", ts_sim(1)));
    check_same(want, forward_backward(m, x), "Sequential");
    /* after the forward the slots hold the stored tensors again, their gradients beside them */
    CHECK(on(m, "0.weight", ts_cpu()) && on(m, "12.bias", ts_sim(0)));
    CHECK(ts_device_equal(ts_device_of(ts_grad(ts_module_get(m, "0.weight"))), ts_cpu()));
    check_same(want_eval, forward_only(m, x), "Sequential, no grad");

    /* placed again without overrides: the hooks are gone, every tensor goes with its unit */
    CHECK_EQ(ts_module_place_str(m, "sim:0=9000,sim:1=9000,cpu=1GiB", (ts_place_opts){0}, NULL),
             TS_OK);
    CHECK(on(m, "0.weight", ts_sim(0)) && on(m, "12.weight", ts_cpu()));
    check_same(forward_only(ref, x), forward_only(m, x), "Sequential, placed again");
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(x);
}

/* ------------------------------------------------------------------ errors */
static void test_errors(void) {
    ts_module *m = mlp_new();
    static const struct {
        const char *rules, *frag;
    } bad[] = {
        {"0.weight", "override '0.weight' has no '='"},
        {"=cpu", "override '=cpu' has an empty pattern"},
        {"^0\\.=cpu,,x=cpu", "empty override in"},
        {"a(=cpu", "override 'a(=cpu': bad regular expression 'a('"},
        {"0=gpu", "override '0=gpu': unknown device 'gpu'"},
        {"0=sim:3", "override '0=sim:3': sim:3 has no budget (add sim:3=SIZE"},
        {"blocks=cpu", "override 'blocks=cpu' matches none of the model's parameters"},
        {"weight=cpu,^0\\.weight$=sim:1", "left by the overrides before it"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_place_plan p;
        CHECK_EQ(ts_module_place_str(m, "sim:0=1MiB,sim:1=1MiB,cpu=1GiB",
                                     (ts_place_opts){.overrides = bad[i].rules}, &p),
                 TS_ERR_ARG);
        CHECK_ERR_HAS(TS_ERR_ARG, bad[i].frag);
        CHECK(p.n_units == 0 && p.n_overrides == 0 && p.overrides == NULL);
    }
    /* the weights (4096 B each, 6 of them) overflow sim:1's budget: nothing moves */
    CHECK_EQ(ts_module_place_str(m, "sim:0=1MiB,sim:1=20000,cpu=1GiB",
                                 (ts_place_opts){.overrides = "^[0-9]+\\.weight$=sim:1"}, NULL),
             TS_ERR_OOM);
    CHECK_ERR_HAS(TS_ERR_OOM, "the budgets cannot hold the model: the tensors overridden to sim:1 "
                              "need 24.50 KiB, its budget is 19.53 KiB");
    CHECK(on(m, "0.weight", ts_cpu()) && on(m, "0.bias", ts_cpu()));
    /* with_grads charges a parameter twice on its override device too */
    CHECK_EQ(
        ts_module_place_str(
            m, "sim:0=1MiB,cpu=8000",
            (ts_place_opts){.overrides = "^0\\.weight$=cpu", .with_grads = true, .dry_run = true},
            NULL),
        TS_ERR_OOM);
    CHECK_ERR_HAS(TS_ERR_OOM, "overridden to cpu need 8.00 KiB");
    ts_module_free(m);
}

/* ------------------------------------------------------------------ a GPT and a ResNet */
static void test_gpt(void) {
    ts_tensor *idx = ts_randint(0, 16, TS_SHAPE(2, 8), (ts_opts){.dtype = TS_I64});
    ts_module *ref = gpt_new(), *m = gpt_new();
    run want = forward_backward(ref, idx);
    /* the token embedding (tied to the head, which runs after the last block) on the cpu, a
     * block's first Linear on sim:1 while the block runs on sim:0 */
    ts_place_plan p;
    CHECK_EQ(ts_module_place_str(m, "sim:0=40KiB,sim:1=20KiB,cpu=1GiB",
                                 (ts_place_opts){.output_device = ts_cpu(),
                                                 .overrides = "^tok_emb\\.=cpu,"
                                                              "blocks\\.1\\.linear1\\.=sim:1"},
                                 &p),
             TS_OK);
    CHECK(ts_device_equal(p.units[0].device, ts_sim(0)) &&
          ts_device_equal(p.units[2].device, ts_sim(0)));
    CHECK_EQ(p.n_overrides, 3);
    check_plan(&p);
    ts_place_plan_free(&p);
    CHECK(on(m, "tok_emb.weight", ts_cpu()) && on(m, "pos_emb.weight", ts_sim(0)));
    CHECK(on(m, "blocks.1.linear1.weight", ts_sim(1)) &&
          on(m, "blocks.1.linear2.weight", ts_sim(0)));
    check_same(want, forward_backward(m, idx), "GPT");
    CHECK(on(m, "tok_emb.weight", ts_cpu()));
    /* with the blocks checkpointed, the recomputation in backward copies the weights in again */
    ts_module *ck = gpt_new();
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "blocks.%d", i);
        CHECK_EQ(ts_module_set_checkpoint(ts_module_child(ck, name), true), TS_OK);
    }
    CHECK_EQ(ts_module_place_str(ck, "sim:0=40KiB,sim:1=20KiB,cpu=1GiB",
                                 (ts_place_opts){.output_device = ts_cpu(),
                                                 .overrides = "^tok_emb\\.=cpu,"
                                                              "blocks\\.1\\.linear1\\.=sim:1"},
                                 NULL),
             TS_OK);
    ts_module *ref2 = gpt_new();
    check_same(forward_backward(ref2, idx), forward_backward(ck, idx), "GPT, checkpointed");
    ts_module_free(ref2);
    ts_module_free(ck);
    ts_module_free(ref);
    ts_module_free(m); /* with its override hooks installed */
    ts_release(idx);
}

static void test_resnet(void) {
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 1, 8, 8), (ts_opts){0});
    ts_module *ref = resnet_new(), *m = resnet_new();
    run want = forward_backward(ref, x);
    /* the stem's batch norm (running statistics updated by the training forward) and a block's
     * second convolution kept on the cpu while their units run on sim:0 */
    CHECK_EQ(ts_module_place_str(m, "sim:0=1MiB,cpu=1GiB",
                                 (ts_place_opts){.overrides = "^bn1\\.=cpu,layer2\\.1\\.conv2=cpu"},
                                 NULL),
             TS_OK);
    CHECK(on(m, "bn1.running_mean", ts_cpu()) && on(m, "conv1.weight", ts_sim(0)));
    CHECK(on(m, "layer2.1.conv2.weight", ts_cpu()) && on(m, "layer2.1.conv1.weight", ts_sim(0)));
    check_same(want, forward_backward(m, x), "ResNet-20");
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(x);
}

/* ------------------------------------------------------------------ capped devices */
/* 32 Linears (135168 B) on a 96 KiB device: with every weight kept on the cpu, inference on
 * sim:0 holds one copy at a time */
static void test_capped(void) {
    ts_tensor *x = ts_randn(TS_SHAPE(4, 32), (ts_opts){0});
    ts_module *ref = deep_new(), *m = deep_new();
    run want = forward_only(ref, x);
    CHECK_EQ(ts_module_place_str(m, "sim:0=90KiB,cpu=1GiB",
                                 (ts_place_opts){.overrides = "weight$=cpu"}, NULL),
             TS_OK);
    CHECK(on(m, "31.bias", ts_sim(0)) && on(m, "31.weight", ts_cpu()));
    check_same(want, forward_only(m, x), "capped, no grad");
    check_same(forward_only(ref, x), forward_only(m, x), "capped, no grad, again");
    ts_module_free(ref);
    ts_module_free(m);
    ts_release(x);
}

/* ------------------------------------------------------------------ allocation failures */
static bool sweep_run(void *p) {
    sweep_state *s = p;
    ts_place_plan plan;
    ts_status st =
        ts_module_place_str(s->m, "sim:0=1KiB,sim:1=1KiB,cpu=1MiB",
                            (ts_place_opts){.overrides = "^0\\.weight=sim:1,bias=cpu"}, &plan);
    ts_place_plan_free(&plan);
    if (st != TS_OK) return false;
    ts_scope_begin();
    ts_tensor *y = ts_forward(s->m, s->x);
    bool ok = y && ts_backward(ts_sum(y)) == TS_OK;
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

int main(void) {
    if (ts_sim_configure(4, 0) != TS_OK)
        return ts_test_skip("sim devices: %s", ts_test_error_str());
    test_sequential();
    test_errors();
    test_gpt();
    test_resnet();
    for (int i = 0; i < 4; i++) ts_empty_cache(ts_sim(i));
    if (ts_sim_configure(4, CAP) != TS_OK)
        return ts_test_skip("sim:0..3 capped: %s", ts_test_error_str());
    test_capped();
    ts_fault_sweep(&(ts_sweep_case){.name = "module_place overrides",
                                    .setup = sweep_setup,
                                    .run = sweep_run,
                                    .teardown = sweep_teardown},
                   600);
    return ts_test_finish();
}
