/* pt_cmds.c — PyTorch checkpoints on the command line: `tessera info model.pt` lists the tensors
 * ts_load_pt reads (name, dtype, shape), `tessera convert model.pt out.safetensors` writes them as
 * safetensors (which tessera, PyTorch's safetensors and Hugging Face load). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tessera/pt.h"

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

bool tcli_is_pt(const char *path) {
    if (ends_with(path, ".pt") || ends_with(path, ".pth") || ends_with(path, ".ckpt")) return true;
    /* pytorch_model.bin and other names: torch.save's files are zips, ONNX files never are */
    FILE *f = fopen(path, "rb");
    unsigned char magic[4] = {0};
    bool zip = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "PK\x03\x04", 4);
    if (f) fclose(f);
    return zip;
}

/* the exit status after the error line (the user's file: 2; out of memory: 1) */
static int fail_load(void) {
    return tcli_fail_ts(ts_error() == TS_ERR_OOM ? TCLI_FAIL : TCLI_USAGE, NULL);
}

static void shape_str(char *buf, size_t n, ts_shape s) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s.ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "", (long long)s.dims[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

int tcli_pt_info(const tcli_opts *o) {
    ts_tensor_list l = {0};
    if (ts_load_pt(o->onnx, ts_cpu(), &l) != TS_OK) return fail_load();
    int64_t elements = 0;
    size_t bytes = 0;
    for (int i = 0; i < l.n; i++) {
        elements += ts_numel(l.tensors[i]);
        bytes += ts_nbytes(l.tensors[i]);
    }
    printf("%s: PyTorch checkpoint, %d tensors, %lld elements (%zu bytes)\n", o->onnx, l.n,
           (long long)elements, bytes);
    for (int i = 0; i < l.n; i++) {
        char sh[160];
        shape_str(sh, sizeof sh, ts_shape_of(l.tensors[i]));
        printf("  %-40s %-8s %s\n", l.names[i], ts_dtype_name(ts_dtype_of(l.tensors[i])), sh);
    }
    ts_tensor_list_free(&l);
    fflush(stdout);
    return TCLI_OK;
}

int tcli_convert(const tcli_opts *o) {
    if (!ends_with(o->output, ".safetensors"))
        return tcli_fail(TCLI_USAGE, "convert: '%s': the file to write must end in .safetensors",
                         o->output);
    ts_tensor_list l = {0};
    if (ts_load_pt(o->onnx, ts_cpu(), &l) != TS_OK) return fail_load();
    const char *meta[2] = {"format", "pt"}; /* what transformers' save_pretrained writes */
    ts_status st = ts_safetensors_save(o->output, &l, meta, 1);
    size_t bytes = 0;
    for (int i = 0; i < l.n; i++) bytes += ts_nbytes(l.tensors[i]);
    int n = l.n;
    ts_tensor_list_free(&l);
    if (st != TS_OK) return tcli_fail_ts(st == TS_ERR_OOM ? TCLI_FAIL : TCLI_USAGE, "convert");
    printf("wrote %s: %d tensors (%zu bytes) from %s\n", o->output, n, bytes, o->onnx);
    fflush(stdout);
    return TCLI_OK;
}
