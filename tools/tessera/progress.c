/* progress.c — training progress: a bar with rate and ETA on a terminal, else plain lines. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

struct tcli_progress {
    tcli_progress_mode mode; /* resolved: BAR, LINES or NONE */
    int64_t epoch, epochs, batches;
    double t0, last_draw;
    int64_t next_line; /* LINES: the batch of the next line */
    bool drawn;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

tcli_progress *tcli_progress_new(tcli_progress_mode mode, int64_t epoch, int64_t epochs,
                                 int64_t batches) {
    tcli_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (mode == TCLI_PROGRESS_AUTO)
        mode = isatty(STDOUT_FILENO) ? TCLI_PROGRESS_BAR : TCLI_PROGRESS_LINES;
    p->mode = mode;
    p->epoch = epoch, p->epochs = epochs, p->batches = batches;
    p->t0 = p->last_draw = now_s();
    /* a line at each fifth of a long epoch; short epochs only get their summary line */
    p->next_line = batches >= 100 ? batches / 5 : batches + 1;
    return p;
}

bool tcli_progress_due(tcli_progress *p, int64_t done) {
    if (!p) return false;
    if (p->mode == TCLI_PROGRESS_BAR) return done == p->batches || now_s() - p->last_draw >= 0.1;
    if (p->mode == TCLI_PROGRESS_LINES)
        return done >= p->next_line && p->next_line <= p->batches / 5 * 4;
    return false;
}

static int terminal_width(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

static void fmt_time(char *buf, size_t n, double s) {
    long t = s < 0 ? 0 : (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

const char *tcli_epoch_str(char *buf, size_t n, int64_t epoch, int64_t epochs) {
    if (epochs >= INT_MAX)
        snprintf(buf, n, "%lld", (long long)epoch);
    else
        snprintf(buf, n, "%lld/%lld", (long long)epoch, (long long)epochs);
    return buf;
}

void tcli_progress_update(tcli_progress *p, int64_t done, double loss, double acc) {
    if (!p) return;
    double t = now_s(), el = t - p->t0, rate = el > 0 ? (double)done / el : 0;
    char eta[32], spent[32];
    fmt_time(eta, sizeof eta, rate > 0 ? (double)(p->batches - done) / rate : 0);
    fmt_time(spent, sizeof spent, el);
    if (p->mode == TCLI_PROGRESS_BAR) {
        char head[64], tail[160], bar[64];
        char ep[48];
        snprintf(head, sizeof head, "epoch %s ",
                 tcli_epoch_str(ep, sizeof ep, p->epoch, p->epochs));
        snprintf(tail, sizeof tail, " %lld/%lld  %.1f batch/s  loss %.4f  acc %.4f  %s<%s",
                 (long long)done, (long long)p->batches, rate, loss, acc, spent, eta);
        /* the bar takes what the terminal's width leaves, so the line never wraps */
        int w = terminal_width() - 1 - (int)strlen(head) - (int)strlen(tail) - 2;
        w = w > 30 ? 30 : w;
        bar[0] = 0;
        if (w >= 5) {
            int fill = (int)((double)w * (double)done / (double)(p->batches ? p->batches : 1));
            bar[0] = '[';
            for (int i = 0; i < w; i++) bar[i + 1] = i < fill ? '#' : i == fill ? '>' : '.';
            bar[w + 1] = ']';
            bar[w + 2] = 0;
        }
        printf("\r\033[K%s%s%.*s", head, bar,
               terminal_width() - 1 - (int)strlen(head) - (int)strlen(bar), tail);
        p->drawn = true;
        p->last_draw = t;
    } else if (p->mode == TCLI_PROGRESS_LINES) {
        char ep[48];
        printf("  epoch %s  batch %lld/%lld  loss %.4f  acc %.4f  %.1f batch/s  ETA %s\n",
               tcli_epoch_str(ep, sizeof ep, p->epoch, p->epochs), (long long)done,
               (long long)p->batches, loss, acc, rate, eta);
        p->next_line += p->batches / 5;
    }
    fflush(stdout);
}

void tcli_progress_end(tcli_progress *p) {
    if (!p) return;
    if (p->drawn) {
        fputs("\r\033[K", stdout);
        fflush(stdout);
    }
    free(p);
}

void tcli_progress_note(tcli_progress *p, const char *fmt, ...) {
    if (p && p->drawn) {
        fputs("\r\033[K", stdout);
        p->drawn = false;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}
