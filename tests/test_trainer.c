/* test_trainer.c — the `tessera` command end to end: --help and the one-line errors of its flags,
 * devices, training on cpu and sim:0 over a synthetic IDX data set (its output lines and exit
 * status, the saved weights checked independently, --log, eval), data parallel and --amp, and CSV
 * data. Resume and mpiexec: test_trainer_dist.c; GPT: test_trainer_gpt.c; ResNets:
 * test_trainer_resnet.c; the harness: support/trainer_run.c. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_run.h"
#include "ts_test.h"

static void test_help_and_errors(void) {
    result r = RUN("--help");
    check_clean_exit(&r);
    const char *opts[] = {"train",         "eval",         "devices",      "--model",
                          "mlp",           "lenet",        "simplecnn",    "--data",
                          "fashion-mnist", "cifar10",      "csv",          "--data-dir",
                          "--device",      "sim:N",        "--epochs",     "--batch-size",
                          "--lr",          "--momentum",   "--optimizer",  "adam",
                          "--seed",        "--workers",    "--checkpoint", "--resume",
                          "--log",         "--csv-target", "--threads",    "dataset-fashion-mnist",
                          "--devices",     "--amp",        "--amp-dtype",  "resnet20",
                          "resnet18",      "--width",      "--augment"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        bool in = r.out && strstr(r.out, opts[i]);
        CHECK(in);
        if (!in) fprintf(stderr, "  --help lacks %s\n", opts[i]);
    }
    result_free(&r);
    r = RUN("train", "--help");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "usage: tessera"));
    result_free(&r);

    /* flags and commands: the argument list and the whole line it must give */
    static const struct {
        const char *args[6];
        const char *line;
    } mistakes[] = {
        {{"train", "--epochs", "x"}, "--epochs: expected a positive integer, got 'x'"},
        {{"train", "--epochs=0"}, "--epochs: expected a positive integer, got '0'"},
        {{"train", "--lr", "-1"}, "--lr: expected a positive number, got '-1'"},
        {{"train", "--momentum", "1.5"}, "--momentum: expected a number in [0, 1), got '1.5'"},
        {{"train", "--batch-size", "12abc"},
         "--batch-size: expected a positive integer, got '12abc'"},
        {{"train", "--model", "resnet"},
         "--model: expected mlp, lenet, simplecnn, resnet20, resnet18 or gpt, got 'resnet'"},
        {{"train", "--optimizer", "lbfgs"},
         "--optimizer: expected sgd, adam or adamw, got 'lbfgs'"},
        {{"train", "--device", "gpu"}, "--device: expected cpu, cuda, cuda:N or sim:N, got 'gpu'"},
        {{"train", "--frobnicate"}, "unknown option '--frobnicate' (see tessera --help)"},
        {{"train", "--lr"}, "--lr: missing value"},
        {{"train", "stray"},
         "unexpected argument 'stray' (options start with --; see tessera --help)"},
        {{"train", "--resume"}, "--resume: needs --checkpoint DIR (the folder to resume from)"},
        {{"eval", "--model", "mlp"}, "eval: needs --checkpoint DIR (or a .safetensors file)"},
        {{"eval", "--epochs", "3", "--checkpoint", "x"},
         "--epochs: not an option of 'tessera eval' (see tessera --help)"},
        {{"fly"},
         "unknown command 'fly': expected train, eval, generate, run, info, export, quantize, "
         "convert or devices (see tessera --help)"},
        {{"convert", "model.pt"},
         "convert: needs a checkpoint and the file to write (tessera convert model.pt "
         "out.safetensors)"},
        {{"convert", "model.pt", "out.safetensors", "extra"},
         "unexpected argument 'extra' (options start with --; see tessera --help)"},
        {{"devices", "--epochs", "1"},
         "--epochs: not an option of 'tessera devices' (see tessera --help)"},
    };
    for (size_t i = 0; i < sizeof mistakes / sizeof *mistakes; i++)
        check_usage_error(run_env(NULL, mistakes[i].args), "tessera: %s\n", mistakes[i].line);
    check_usage_prefix(RUN("train", "--device", "cuda:7"),
                       "tessera: --device: cuda:7 is not available (");
    {
        const char *const none[] = {NULL};
        check_usage_error(run_env(NULL, none), "tessera: missing command: train, eval, generate, "
                                               "run, info, export, quantize, convert or devices "
                                               "(see tessera --help)\n");
    }
    /* missing data: a folder that is not there, a folder without the files, mnist's default */
    check_usage_error(RUN("train", "--data-dir", path_in("nowhere", NULL)),
                      "tessera: --data-dir: '%s': No such file or directory (it should hold "
                      "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])\n",
                      path_in("nowhere", NULL));
    check_usage_prefix(RUN("train", "--data", "mnist", "--data-dir", path_in("empty", NULL)),
                       "tessera: %s: No such file or directory",
                       path_in("empty", "train-images-idx3-ubyte[.gz]"));
    check_usage_prefix(RUN("train", "--data", "cifar10", "--data-dir", path_in("empty", NULL)),
                       "tessera: %s: No such file or directory; download the CIFAR-10 binary "
                       "version (cifar-10-binary.tar.gz from ",
                       path_in("empty", "data_batch_1.bin"));
    check_usage_error(
        RUN("train", "--data", "csv", "--data-dir", path_in("empty", "x.csv")),
        "tessera: --data-dir: '%s': No such file or directory (csv: a .csv file, or a "
        "folder with train.csv and test.csv)\n",
        path_in("empty", "x.csv"));
    check_usage_error(RUN("train", "--data", "mnist"),
                      "tessera: no data: 'data/mnist': No such file or directory (it should hold "
                      "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])\n");
    /* Fashion-MNIST's default folder absent: the message says how to install it */
    {
        const char *argv[] = {TS_TESSERA_NODATA_BIN, "train", NULL};
        check_usage_error(run_argv(NULL, argv),
                          "tessera: no Fashion-MNIST in /nonexistent/share/datasets/fashion-mnist: "
                          "install Debian's dataset-fashion-mnist (sudo apt-get install "
                          "dataset-fashion-mnist, or make deps) or pass --data-dir DIR\n");
    }
    /* the lenet model of a checkpoint trained as an mlp: refused, the checkpoint untouched */
}

static void check_training_output(const result *r, const char *dev) {
    check_clean_exit(r);
    CHECK(r->out && strstr(r->out, "MLP (101770 parameters) on MNIST (512 train / 128 test) on "));
    CHECK(r->out && strstr(r->out, dev));
    epoch_line e[4];
    int n = parse_epochs(r->out, e, 4);
    CHECK_EQ(n, 2);
    if (n != 2) return;
    CHECK(e[0].epoch == 1 && e[1].epoch == 2 && e[0].epochs == 2);
    /* from chance (ln 10 = 2.30) down, and the data is easy */
    CHECK(e[0].train_loss < 2.3 && e[1].train_loss < e[0].train_loss);
    CHECK(e[1].test_loss < e[0].test_loss);
    CHECK(e[1].test_acc >= 0.9);
    CHECK(e[0].secs >= 0 && e[1].secs >= 0);
    CHECK_NEAR(final_accuracy(r->out), e[1].test_acc, 1e-9);
    CHECK_EQ(count_lines(r->out), 5); /* two header lines, two epochs, the final accuracy */
}

static void test_train_cpu_and_sim(void) {
    result r = RUN("train", "--model", "mlp", DATA, "--device", "cpu", "--progress", "none",
                   "--checkpoint", path_in("cpu", NULL), "--log", path_in("cpu", "log"));
    check_training_output(&r, "cpu");
    double printed = final_accuracy(r.out);
    result_free(&r);
    /* the printed accuracy is that of the saved weights, recomputed here independently */
    double ref = mlp_reference_accuracy(path_in("cpu", "model.safetensors"));
    CHECK_NEAR(ref, printed, 1.5 / NTEST);
    CHECK_OK();

    /* --log: every epoch's scalars */
    char *log = slurp(path_in("cpu", "log/metrics.jsonl"), NULL);
    const char *tags[] = {"train/loss", "train/accuracy", "test/loss", "test/accuracy", "\"lr\""};
    for (int i = 0; i < 5; i++) CHECK(log && strstr(log, tags[i]));
    free(log);
    DIR *d = opendir(path_in("cpu", "log"));
    bool events = false;
    struct dirent *e;
    while (d && (e = readdir(d))) events |= !strncmp(e->d_name, "events.out.tfevents.", 20);
    if (d) closedir(d);
    CHECK(events);

    /* eval of the checkpoint prints the same accuracy */
    r = RUN("eval", "--model", "mlp", DATA, "--checkpoint", path_in("cpu", NULL));
    check_clean_exit(&r);
    const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(p && fabs(strtod(p + 14, NULL) - printed) < 1e-9);
    result_free(&r);

    /* sim:0 runs the same arithmetic: the same weights to the bit */
    r = RUN("train", "--model", "mlp", DATA, "--device", "sim:0", "--progress", "none",
            "--checkpoint", path_in("sim", NULL), "--workers", "0");
    check_training_output(&r, "sim:0");
    result_free(&r);
    CHECK(same_file(path_in("cpu", "model.safetensors"), path_in("sim", "model.safetensors")));

    /* LeNet-5 and SimpleCNN build and train on the same images */
    r = RUN("train", "--model", "lenet", DATA, "--epochs", "1", "--progress", "lines");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "LeNet-5 (61706 parameters)"));
    epoch_line el;
    CHECK_EQ(parse_epochs(r.out, &el, 1), 1);
    result_free(&r);
    r = RUN("train", "--model", "simplecnn", DATA, "--epochs", "1", "--device", "sim:1",
            "--batch-size", "128", "--optimizer", "adam");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "Adam lr 0.001"));
    result_free(&r);

    /* a checkpoint of another model: one line, status 2 */
    check_usage_prefix(
        RUN("train", "--model", "lenet", DATA, "--checkpoint", path_in("cpu", NULL), "--resume"),
        "tessera: --resume: load_state_dict: Error(s) in loading state_dict for LeNet5: Missing "
        "key(s) in state_dict: \"conv1.weight\", \"conv1.bias\", \"conv2.weight\"");
    check_usage_error(RUN("train", "--model", "mlp", DATA, "--checkpoint", path_in("cpu", NULL),
                          "--resume", "--batch-size", "100"),
                      "tessera: --resume: %s was saved at step 16 by a run with 8 batches an "
                      "epoch, this one has 6: resume with the data, --batch-size and number of "
                      "processes it was trained with\n",
                      path_in("cpu", "latest.safetensors"));
}

/* --devices (data parallel) and --amp (autocast, grad scaling for float16) */
static void test_parallel_and_amp(void) {
    check_usage_error(RUN("train", "--devices", "sim:0,sim:0"),
                      "tessera: --devices: sim:0 appears twice\n");
    check_usage_error(RUN("train", "--devices", "sim:0,,sim:1"),
                      "tessera: --devices: expected a comma-separated list such as sim:0,sim:1, "
                      "got 'sim:0,,sim:1'\n");
    check_usage_error(RUN("train", "--devices", "sim:0,gpu"),
                      "tessera: --devices: expected cpu, cuda, cuda:N or sim:N, got 'gpu'\n");
    check_usage_error(RUN("train", "--device", "cpu", "--devices", "sim:0,sim:1"),
                      "tessera: --devices: give either --device or --devices, not both\n");
    check_usage_error(RUN("train", "--amp-dtype", "f16"),
                      "tessera: --amp-dtype: only with --amp\n");
    check_usage_error(RUN("train", "--amp", "--amp-dtype", "f32"),
                      "tessera: --amp-dtype: expected bf16 or f16, got 'f32'\n");
    check_usage_error(RUN("eval", "--devices", "sim:0,sim:1", "--checkpoint", trainer_dir),
                      "tessera: --devices: not an option of 'tessera eval' (see tessera --help)\n");

    /* data parallel over two sim devices trains as well as one device, and its checkpoint holds
     * the plain model: a single-device eval loads it */
    result r = RUN("train", "--model", "mlp", DATA, "--devices", "sim:0,sim:1", "--progress",
                   "none", "--checkpoint", path_in("dp", NULL));
    check_training_output(&r, "on sim:0,sim:1 (data parallel)");
    double printed = final_accuracy(r.out);
    result_free(&r);
    CHECK_NEAR(mlp_reference_accuracy(path_in("dp", "model.safetensors")), printed, 1.5 / NTEST);
    r = RUN("eval", "--model", "mlp", DATA, "--checkpoint", path_in("dp", NULL), "--device",
            "sim:1");
    check_clean_exit(&r);
    const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(p && fabs(strtod(p + 14, NULL) - printed) < 1e-9);
    result_free(&r);

    /* bfloat16 autocast on sim:0 (no scaler), and float16 with grad scaling on cpu whose scale
     * goes into the checkpoint */
    r = RUN("train", "--model", "mlp", DATA, "--device", "sim:0", "--amp", "--progress", "none");
    check_training_output(&r, "on sim:0, mixed precision bfloat16\n");
    result_free(&r);
    r = RUN("train", "--model", "lenet", DATA, "--epochs", "1", "--amp", "--amp-dtype", "f16",
            "--devices", "sim:0,sim:1", "--progress", "none", "--checkpoint", path_in("amp", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(data parallel), mixed precision float16 with grad scaling"));
    result_free(&r);
    ts_tensor_list sd = {0};
    ts_safetensors_load(path_in("amp", "latest.safetensors"), ts_cpu(), &sd);
    CHECK_OK();
    ts_tensor *scale = ts_tensor_list_get(&sd, "scaler.scale");
    CHECK(scale != NULL);
    if (scale) CHECK(ts_item(scale) > 0 && ts_item(scale) <= 65536.0);
    CHECK(ts_tensor_list_get(&sd, "model.conv1.weight") != NULL);
    ts_tensor_list_free(&sd);
    /* and resuming restores it */
    r = RUN("train", "--model", "lenet", DATA, "--epochs", "1", "--amp", "--amp-dtype", "f16",
            "--progress", "none", "--checkpoint", path_in("amp", NULL), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "resumed from"));
    result_free(&r);
}

static void test_devices(void) {
    result r = RUN_ENV("TS_SIM_DEVICES=2", "devices");
    check_clean_exit(&r);
    CHECK(r.out && !strncmp(r.out, "cpu ", 4) && strstr(r.out, "GiB total"));
    CHECK(r.out && strstr(r.out, "\nsim:0 ") && strstr(r.out, "\nsim:1 ") &&
          !strstr(r.out, "sim:2"));
    result_free(&r);
}

/* The CSV data of support/trainer_run.c: 3 classes on very different scales (the trainer
 * standardises them), a noise column and the target in the middle. */
static void test_csv(void) {
    write_toy_csv(path_in("toy.csv", NULL));
    result r = RUN("train", "--model", "mlp", "--data", "csv", "--data-dir",
                   path_in("toy.csv", NULL), "--csv-target", "label", "--epochs", "4",
                   "--batch-size", "16", "--checkpoint", path_in("csvck", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(160 train / 40 test)"));
    double acc = final_accuracy(r.out);
    CHECK(acc >= 0.9);
    result_free(&r);
    r = RUN("eval", "--model", "mlp", "--data", "csv", "--data-dir", path_in("toy.csv", NULL),
            "--csv-target", "2", "--checkpoint", path_in("csvck", "latest.safetensors"));
    check_clean_exit(&r);
    const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(p && fabs(strtod(p + 14, NULL) - acc) < 1e-9);
    result_free(&r);
    check_usage_error(RUN("train", "--model", "mlp", "--data", "csv", "--data-dir",
                          path_in("toy.csv", NULL), "--csv-target", "nope"),
                      "tessera: %s: no column named 'nope' in the header (4 columns)\n",
                      path_in("toy.csv", NULL));
    check_usage_error(RUN("train", "--model", "lenet", "--data", "csv", "--data-dir",
                          path_in("toy.csv", NULL), "--csv-target", "label"),
                      "tessera: --model lenet: needs image data; use --model mlp for --data csv\n");
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_help_and_errors();
    test_devices();
    test_train_cpu_and_sim();
    test_parallel_and_amp();
    test_csv();
    trainer_cleanup();
    return ts_test_finish();
}
