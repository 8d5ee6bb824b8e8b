/* trainer_run.h — the harness of the `tessera` command's end-to-end tests (tests/test_trainer*.c):
 * a temporary folder with a synthetic IDX data set (MNIST's file names), running the command with
 * extra environment entries, its exit status and output lines, and checkpoints read back. */
#ifndef TS_TRAINER_RUN_H
#define TS_TRAINER_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* The test programs get the executables' paths from tests/CMakeLists.txt. */
#ifndef TS_TRAINER_RUN_IMPL
#if !defined(TS_TESSERA_BIN) || !defined(TS_TESSERA_NODATA_BIN)
#error "TS_TESSERA_BIN and TS_TESSERA_NODATA_BIN must name the tessera executables"
#endif
#endif

enum { NTRAIN = 512, NTEST = 128, SIDE = 28, CLASSES = 10 };

/* The temporary folder: data/ (NTRAIN train and NTEST test images of SIDE x SIDE, CLASSES
 * classes) and empty/. */
extern char trainer_dir[256];
/* The test images and labels written there, for references computed here. */
extern uint8_t trainer_test_img[NTEST * SIDE * SIDE], trainer_test_lab[NTEST];

/* Makes the folder and the data set; `tessera` is the command RUN starts. False when the folder
 * cannot be made. */
bool trainer_setup(const char *tessera);
/* Removes the folder and all in it. */
void trainer_cleanup(void);

/* The generator of the synthetic data (an LCG). */
uint32_t lcg(uint32_t *s);
/* A CSV file of 200 rows "a,b,label,noise": class k (of 3) has feature a near 10k and b near
 * 100 - 50k, on very different scales, with a noise column and the target in the middle. */
void write_toy_csv(const char *path);

/* ------------------------------------------------------------ running tessera */
typedef struct result {
    int status; /* waitpid's */
    char *out, *err;
} result;

/* A file's bytes, NUL-terminated (malloc'ed), their count in *len; NULL when unreadable. */
char *slurp(const char *path, size_t *len);
/* Runs argv (NULL-terminated, argv[0] the program) with extra "K=V" environment entries. */
result run_argv(const char *const *env, const char *const *argv);
/* Runs tessera with the arguments (NULL-terminated) and extra "K=V" environment entries. */
result run_env(const char *const *env, const char *const *args);
#define RUN(...) run_env(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_ENV(env, ...)                                                                          \
    run_env((const char *const[]){env, NULL}, (const char *const[]){__VA_ARGS__, NULL})

void result_free(result *r);
int exit_code(const result *r);
bool killed(const result *r); /* by SIGKILL */
int count_lines(const char *s);

/* Success: status 0 and nothing on stderr (sanitizer and leak reports would land there). */
void check_clean_exit(const result *r);
/* A user's mistake: status 2, nothing on stdout, one "tessera: ..." line on stderr: exactly the
 * expected line (printf-style), or with prefix_only a line that starts so (messages whose tail
 * comes from the library or the system). Frees r. */
void check_usage(result r, bool prefix_only, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define check_usage_error(r, ...)  check_usage(r, false, __VA_ARGS__)
#define check_usage_prefix(r, ...) check_usage(r, true, __VA_ARGS__)

/* ------------------------------------------------------------ output lines */
typedef struct epoch_line {
    int epoch, epochs;
    double train_loss, train_acc, test_loss, test_acc, secs;
} epoch_line;

/* The "epoch E/N  train loss L acc A  test loss L acc A  time Ts" lines, in order. */
int parse_epochs(const char *out, epoch_line *ls, int max);
/* The "test accuracy: A" of the last line, or -1. */
double final_accuracy(const char *out);

/* ------------------------------------------------------------ files */
/* "<trainer_dir>/sub[/file]" (one of four rotating buffers). */
char *path_in(const char *sub, const char *file);
#define DATA "--data", "mnist", "--data-dir", path_in("data", NULL)
bool same_file(const char *a, const char *b);
/* A cut-short temporary checkpoint file (.latest.safetensors.tmp*) in dir. */
bool has_tmp_file(const char *dir);
/* An int64 scalar of a safetensors file ("step" of a checkpoint), or -1. */
int64_t tensor_i64(const char *path, const char *name);
int64_t checkpoint_step(const char *path);
/* largest |a - b| / max |b| over every tensor of two safetensors files (INFINITY when the names
 * or shapes differ) */
double weights_rel_diff(const char *a, const char *b);
/* Accuracy of the saved MLP on the test images, computed here in double precision from the
 * weights file: an independent check of what the trainer printed. */
double mlp_reference_accuracy(const char *weights);

#endif /* TS_TRAINER_RUN_H */
