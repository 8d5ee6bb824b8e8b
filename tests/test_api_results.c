/* test_api_results.c — the result convention of the public C API (decision 0025,
 * docs/decisions/0025-c-api-results.md): the functions that returned void and can fail now return
 * their ts_status, the counts that returned 0 on error return -1, and each constructor's
 * conventional name (ts_..._new) is the same function as its 0.1 name (the same result, the same
 * error). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ statuses */
static void statuses(void) {
    ts_scope_begin();
    ts_tensor *x = ts_full(TS_SHAPE(3), 2.0, (ts_opts){0});
    CHECK_EQ(ts_set_requires_grad(x, true), TS_OK);
    ts_tensor *ints = ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_I64});
    CHECK_EQ(ts_set_requires_grad(ints, true), TS_ERR_DTYPE);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK_EQ(ts_set_requires_grad(NULL, true), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *y = ts_mul(x, x);
    CHECK_EQ(ts_set_requires_grad(y, false), TS_ERR_STATE); /* not a leaf */
    CHECK_ERR(TS_ERR_STATE);

    CHECK_EQ(ts_backward(ts_sum(y)), TS_OK);
    CHECK_NEAR(ts_item(ts_sum(ts_grad(x))), 12.0, 0);
    /* a second backward through the freed graph fails, and says so */
    ts_tensor *loss = ts_sum(ts_mul(x, x));
    CHECK_EQ(ts_backward_ex(loss, NULL, (ts_backward_opts){0}), TS_OK);
    const ts_status again = ts_backward(loss);
    CHECK(again != TS_OK && again == ts_error());
    ts_error_clear();
    CHECK_EQ(ts_backward(NULL), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_backward_with(ts_mul(x, x), NULL), TS_ERR_ARG); /* the gradient is NULL */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_backward_with(ts_mul(x, x), ts_ones(TS_SHAPE(3), (ts_opts){0})), TS_OK);
    /* an error pending before the call: the status says so (never TS_OK after a failure) */
    ts_error_set(TS_ERR_IO, "earlier failure");
    CHECK_EQ(ts_backward(ts_sum(ts_mul(x, x))), TS_ERR_IO);
    CHECK_ERR(TS_ERR_IO);

    ts_optim *opt = ts_sgd_new_params(&x, 1, (ts_sgd_opts){.lr = 0.1});
    CHECK_EQ(ts_optim_zero_grad(opt), TS_OK);
    CHECK(ts_grad(x) == NULL);
    CHECK_EQ(ts_optim_zero_grad(NULL), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_lr_scheduler *oc = ts_onecycle_lr_new(opt, 1.0, 2);
    CHECK_EQ(ts_scheduler_step(oc), TS_OK);
    CHECK_EQ(ts_scheduler_step(oc), TS_OK);
    CHECK_EQ(ts_scheduler_step(oc), TS_ERR_STATE); /* past total_steps */
    CHECK_ERR(TS_ERR_STATE);
    CHECK_EQ(ts_scheduler_step(NULL), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_scheduler_free(oc);

    /* sentinels: -1 and the error */
    CHECK_EQ(ts_optim_num_groups(opt), 1);
    CHECK_EQ(ts_optim_num_groups(NULL), -1);
    CHECK_ERR(TS_ERR_ARG);
    ts_optim_free(opt);
    CHECK_EQ(ts_dataset_len(NULL), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_grad_scaler_growth_tracker(NULL), -1);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    CHECK_OK();
}

static void files(void) {
    char dir[] = "/tmp/ts_api_results_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ(ts_logger_close(NULL), TS_OK);
    ts_logger *lg = ts_logger_open(dir);
    CHECK(lg != NULL);
    CHECK_EQ(ts_logger_scalar(lg, "loss", 1, 0.5), TS_OK);
    CHECK_EQ(ts_logger_close(lg), TS_OK);

    char path[256];
    snprintf(path, sizeof path, "%s/events.out.tfevents.1.test", dir);
    ts_event_file *ef = ts_event_file_open(path, 1.0);
    CHECK(ef != NULL);
    CHECK_EQ(ts_event_file_close(ef), TS_OK);
    /* the old name: the same function (the file exists now: the same refusal) */
    CHECK(ts_event_file_create(path, 1.0) == NULL);
    CHECK_ERR(TS_ERR_IO);
    CHECK(ts_event_file_open(path, 1.0) == NULL);
    CHECK_ERR(TS_ERR_IO);
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
    CHECK_OK();
}

/* ------------------------------------------------------------------ the conventional names */
/* Both calls fail with the same error (code and message): the same function behind both names. */
#define SAME_FAILURE(OLD_CALL, NEW_CALL)                                                           \
    do {                                                                                           \
        CHECK((OLD_CALL) == NULL);                                                                 \
        const ts_status c_ = ts_error();                                                           \
        char m_[512];                                                                              \
        snprintf(m_, sizeof m_, "%s", ts_error_message());                                         \
        ts_error_clear();                                                                          \
        CHECK((NEW_CALL) == NULL);                                                                 \
        CHECK(c_ != TS_OK && ts_error() == c_);                                                    \
        CHECK_STREQ(ts_error_message(), m_);                                                       \
        ts_error_clear();                                                                          \
    } while (0)

static void data_names(void) {
    SAME_FAILURE(ts_idx_dataset("/nonexistent/i", "/nonexistent/l"),
                 ts_idx_dataset_new("/nonexistent/i", "/nonexistent/l"));
    SAME_FAILURE(ts_mnist("/nonexistent", TS_SPLIT_TEST),
                 ts_mnist_new("/nonexistent", TS_SPLIT_TEST));
    SAME_FAILURE(ts_cifar10("/nonexistent", TS_SPLIT_TEST),
                 ts_cifar10_new("/nonexistent", TS_SPLIT_TEST));
    SAME_FAILURE(ts_csv_dataset("/nonexistent.csv", (ts_csv_opts){0}),
                 ts_csv_dataset_new("/nonexistent.csv", (ts_csv_opts){0}));
    SAME_FAILURE(ts_text_dataset("/nonexistent.txt", TS_SPLIT_TRAIN, (ts_text_opts){0}),
                 ts_text_dataset_new("/nonexistent.txt", TS_SPLIT_TRAIN, (ts_text_opts){0}));
    SAME_FAILURE(ts_image_folder("/nonexistent"), ts_image_folder_new("/nonexistent"));
    SAME_FAILURE(ts_tensor_dataset(NULL, NULL), ts_tensor_dataset_new(NULL, NULL));
    SAME_FAILURE(ts_normalize(0, NULL, NULL), ts_normalize_new(0, NULL, NULL));
    SAME_FAILURE(ts_normalize3(0, 0, 0, 0, 1, 1), ts_normalize3_new(0, 0, 0, 0, 1, 1));
    SAME_FAILURE(ts_random_crop(0, 0), ts_random_crop_new(0, 0));
    SAME_FAILURE(ts_random_hflip(2.0), ts_random_hflip_new(2.0));
    SAME_FAILURE(ts_compose(-1, NULL), ts_compose_new(-1, NULL));
    SAME_FAILURE(ts_distributed_sampler(-1, (ts_distributed_sampler_opts){.num_replicas = 1}),
                 ts_distributed_sampler_new(-1, (ts_distributed_sampler_opts){.num_replicas = 1}));

    ts_scope_begin();
    ts_dataset *d = ts_tensor_dataset_new(ts_zeros(TS_SHAPE(5, 2), (ts_opts){0}), NULL);
    CHECK(d && ts_dataset_len(d) == 5);
    ts_dataset_free(d);
    ts_sampler *s =
        ts_distributed_sampler_new(10, (ts_distributed_sampler_opts){.num_replicas = 3});
    CHECK(s && ts_sampler_len(s) == 4);
    ts_sampler_free(s);
    ts_transform *steps[2] = {ts_to_tensor_new(), ts_random_hflip_new(0.5)};
    ts_transform *t = ts_compose_new(2, steps);
    CHECK(t != NULL);
    ts_transform_free(t);
    ts_scope_end();
    CHECK_OK();
}

static ts_tensor *self_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    return ts_retain(x);
}

/* a module with one parameter [0.5, -1, 2] and the gradient [1, -2, 0.25] */
static ts_module *param_module(void) {
    ts_module *m = ts_module_alloc(sizeof(ts_module), "P", self_forward);
    const double w[3] = {0.5, -1.0, 2.0}, g[3] = {1.0, -2.0, 0.25};
    ts_tensor *p = ts_module_param(m, "weight", ts_tensor_f64(TS_SHAPE(3), w, (ts_opts){0}));
    ts_tensor *grad = ts_tensor_f64(TS_SHAPE(3), g, (ts_opts){0});
    ts_set_grad(p, grad);
    ts_release(grad);
    return m;
}

/* Two steps of each optimizer under both names give the same parameter, bit for bit, and a
 * different one from the other kinds (so a name forwarding to the wrong kind is caught). */
#define N_OPT 12
static void optimizer_names(void) {
    double after[N_OPT][2][3];
    for (int k = 0; k < N_OPT; k++)
        for (int which = 0; which < 2; which++) {
            ts_module *m = param_module();
            ts_tensor *p = ts_module_get(m, "weight");
            ts_optim *o = NULL;
            const bool n = which == 1;
            switch (k) {
            case 0: {
                ts_sgd_opts so = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1};
                o = n ? ts_sgd_new(m, so) : ts_sgd(m, so);
                break;
            }
            case 1: {
                ts_adam_opts ao = {.lr = 0.1, .weight_decay = 0.1};
                o = n ? ts_adam_new(m, ao) : ts_adam(m, ao);
                break;
            }
            case 2: {
                ts_adam_opts ao = {.lr = 0.1, .weight_decay = 0.1};
                o = n ? ts_adamw_new(m, ao) : ts_adamw(m, ao);
                break;
            }
            case 3: {
                ts_rmsprop_opts ro = {.lr = 0.1, .weight_decay = 0.1};
                o = n ? ts_rmsprop_new(m, ro) : ts_rmsprop(m, ro);
                break;
            }
            case 4: {
                ts_adagrad_opts ao = ts_adagrad_defaults();
                ao.lr = 0.1;
                o = n ? ts_adagrad_new(m, ao) : ts_adagrad(m, ao);
                break;
            }
            case 5: {
                ts_adadelta_opts ao = ts_adadelta_defaults();
                o = n ? ts_adadelta_new(m, ao) : ts_adadelta(m, ao);
                break;
            }
            case 6: {
                ts_adamax_opts ao = ts_adamax_defaults();
                ao.lr = 0.1;
                o = n ? ts_adamax_new(m, ao) : ts_adamax(m, ao);
                break;
            }
            case 7: {
                ts_nadam_opts no = ts_nadam_defaults();
                no.lr = 0.1;
                o = n ? ts_nadam_new(m, no) : ts_nadam(m, no);
                break;
            }
            case 8: {
                ts_radam_opts ro = ts_radam_defaults();
                ro.lr = 0.1;
                o = n ? ts_radam_new(m, ro) : ts_radam(m, ro);
                break;
            }
            case 9: {
                ts_asgd_opts ao = ts_asgd_defaults();
                ao.lr = 0.1;
                o = n ? ts_asgd_new(m, ao) : ts_asgd(m, ao);
                break;
            }
            case 10: {
                ts_rprop_opts ro = ts_rprop_defaults();
                ro.lr = 0.1;
                o = n ? ts_rprop_new(m, ro) : ts_rprop(m, ro);
                break;
            }
            default: { /* two groups: the 1-dim weight goes to the group without decay */
                ts_adam_opts ao = {.lr = 0.1, .weight_decay = 0.5};
                o = n ? ts_adamw_new_decay_groups(m, ao) : ts_adamw_decay_groups(m, ao);
                break;
            }
            }
            CHECK(o != NULL);
            CHECK_EQ(ts_optim_step(o), TS_OK);
            CHECK_EQ(ts_optim_step(o), TS_OK);
            CHECK_EQ(ts_copy_to_host(p, after[k][which], sizeof after[k][which]), TS_OK);
            ts_optim_free(o);
            ts_module_free(m);
        }
    for (int k = 0; k < N_OPT; k++) {
        CHECK(memcmp(after[k][0], after[k][1], sizeof after[k][0]) == 0);
        for (int j = 0; j < k; j++)
            if (!(k == 11 && j == 2)) /* decay groups on a 1-dim weight: AdamW without decay */
                CHECK(memcmp(after[k][0], after[j][0], sizeof after[k][0]) != 0);
    }

    /* the _params forms over an explicit list: the same refusal of a negative learning rate */
    ts_scope_begin();
    ts_tensor *q = ts_ones(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    SAME_FAILURE(ts_sgd_params(&q, 1, (ts_sgd_opts){.lr = -1}),
                 ts_sgd_new_params(&q, 1, (ts_sgd_opts){.lr = -1}));
    SAME_FAILURE(ts_adam_params(&q, 1, (ts_adam_opts){.lr = -1}),
                 ts_adam_new_params(&q, 1, (ts_adam_opts){.lr = -1}));
    SAME_FAILURE(ts_adamw_params(&q, 1, (ts_adam_opts){.lr = -1}),
                 ts_adamw_new_params(&q, 1, (ts_adam_opts){.lr = -1}));
    SAME_FAILURE(ts_rmsprop_params(&q, 1, (ts_rmsprop_opts){.lr = -1}),
                 ts_rmsprop_new_params(&q, 1, (ts_rmsprop_opts){.lr = -1}));
    SAME_FAILURE(ts_adagrad_params(&q, 1, (ts_adagrad_opts){.lr = -1}),
                 ts_adagrad_new_params(&q, 1, (ts_adagrad_opts){.lr = -1}));
    SAME_FAILURE(ts_adadelta_params(&q, 1, (ts_adadelta_opts){.lr = -1}),
                 ts_adadelta_new_params(&q, 1, (ts_adadelta_opts){.lr = -1}));
    SAME_FAILURE(ts_adamax_params(&q, 1, (ts_adamax_opts){.lr = -1}),
                 ts_adamax_new_params(&q, 1, (ts_adamax_opts){.lr = -1}));
    SAME_FAILURE(ts_nadam_params(&q, 1, (ts_nadam_opts){.lr = -1}),
                 ts_nadam_new_params(&q, 1, (ts_nadam_opts){.lr = -1}));
    SAME_FAILURE(ts_radam_params(&q, 1, (ts_radam_opts){.lr = -1}),
                 ts_radam_new_params(&q, 1, (ts_radam_opts){.lr = -1}));
    SAME_FAILURE(ts_asgd_params(&q, 1, (ts_asgd_opts){.lr = -1}),
                 ts_asgd_new_params(&q, 1, (ts_asgd_opts){.lr = -1}));
    SAME_FAILURE(ts_rprop_params(&q, 1, (ts_rprop_opts){.lr = -1}),
                 ts_rprop_new_params(&q, 1, (ts_rprop_opts){.lr = -1}));

    /* schedulers: over no optimizer, each refuses naming itself */
    const int ms[1] = {1};
    SAME_FAILURE(ts_step_lr(NULL, 1, 0.5), ts_step_lr_new(NULL, 1, 0.5));
    SAME_FAILURE(ts_multistep_lr(NULL, ms, 1, 0.5), ts_multistep_lr_new(NULL, ms, 1, 0.5));
    SAME_FAILURE(ts_cosine_lr(NULL, 5, 0), ts_cosine_lr_new(NULL, 5, 0));
    SAME_FAILURE(ts_linear_lr(NULL, 0.5, 1, 4), ts_linear_lr_new(NULL, 0.5, 1, 4));
    SAME_FAILURE(ts_onecycle_lr(NULL, 1, 4), ts_onecycle_lr_new(NULL, 1, 4));
    SAME_FAILURE(ts_warmup_cosine_lr(NULL, 1, 4, 0), ts_warmup_cosine_lr_new(NULL, 1, 4, 0));
    ts_scope_end();
    CHECK_OK();
}

static void model_and_wrapper_names(void) {
    const ts_resnet_config small = {.num_classes = 3, .width = 2};
    ts_module *(*const old[4])(ts_resnet_config) = {ts_resnet18, ts_resnet34, ts_resnet50,
                                                    ts_resnet20};
    ts_module *(*const new[4])(ts_resnet_config) = {ts_resnet18_new, ts_resnet34_new,
                                                    ts_resnet50_new, ts_resnet20_new};
    int64_t counts[4];
    for (int i = 0; i < 4; i++) {
        ts_module *a = old[i](small), *b = new[i](small);
        CHECK(a && b);
        counts[i] = ts_module_num_parameters(a);
        CHECK_EQ(ts_module_num_parameters(b), counts[i]);
        for (int j = 0; j < i; j++) CHECK(counts[j] != counts[i]); /* the models differ */
        ts_module_free(a);
        ts_module_free(b);
    }
    ts_module *a = ts_resnet_cifar(32, small), *b = ts_resnet_cifar_new(32, small);
    CHECK(a && b && ts_module_num_parameters(a) == ts_module_num_parameters(b));
    CHECK(ts_module_num_parameters(a) != counts[3]); /* ResNet-32, not ResNet-20 */
    ts_module_free(a);
    ts_module_free(b);
    SAME_FAILURE(ts_resnet_cifar(7, small), ts_resnet_cifar_new(7, small)); /* not 6n + 2 */

    SAME_FAILURE(ts_ddp(NULL, (ts_ddp_opts){0}), ts_ddp_new(NULL, (ts_ddp_opts){0}));
    SAME_FAILURE(ts_fsdp(NULL, (ts_fsdp_opts){0}), ts_fsdp_new(NULL, (ts_fsdp_opts){0}));
    SAME_FAILURE(ts_data_parallel(NULL, NULL, 0, (ts_device){0}),
                 ts_data_parallel_new(NULL, NULL, 0, (ts_device){0}));
    const int ranks[1] = {5};
    SAME_FAILURE(ts_dist_new_group(ranks, 1), ts_dist_group_new(ranks, 1));
    ts_module *dp = ts_data_parallel_new(ts_linear_new(2, 2), NULL, 0, (ts_device){0});
    CHECK(dp && strcmp(dp->type_name, "DataParallel") == 0);
    ts_module_free(dp);
    CHECK_OK();
}

int main(void) {
    statuses();
    files();
    data_names();
    optimizer_names();
    model_and_wrapper_names();
    return ts_test_finish();
}
