/* bench_header_memory.c — the peak memory of loading one safetensors file (a hostile header, made
 * by bench/header_memory.sh): prints the status, the start of the message and the peak resident
 * set (getrusage) in MiB. Usage: bench_header_memory FILE */
#include <stdio.h>
#include <sys/resource.h>

#include "tessera.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_header_memory FILE\n");
        return 2;
    }
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    ts_tensor_list l = {0};
    ts_status st = ts_safetensors_load(argv[1], ts_cpu(), &l);
    getrusage(RUSAGE_SELF, &after);
    printf("%s: %s %.100s\n", argv[1], ts_status_string(st), st ? ts_error_message() : "");
    printf("peak RSS %.1f MiB (%.1f MiB before loading)\n", after.ru_maxrss / 1024.0,
           before.ru_maxrss / 1024.0);
    ts_tensor_list_free(&l);
    return 0;
}
