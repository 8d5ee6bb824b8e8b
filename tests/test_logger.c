/* test_logger.c — CRC-32C known answers, TensorBoard event files read back by an independent record
 * and protobuf reader, metrics.jsonl parsed back with cJSON, and the logger's error paths. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <float.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/crc32c.h"
#include "ts_test.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

static void remove_tree(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0, got;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    *n = len;
    return buf;
}

/* Names of the event files in dir (up to max), malloc'ed full paths; returns the count. */
static int event_files(const char *dir, char **out, int max) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, "events.out.tfevents.", 20) == 0 && n < max) {
            out[n] = malloc(strlen(dir) + strlen(de->d_name) + 2);
            sprintf(out[n++], "%s/%s", dir, de->d_name);
        }
    if (d) closedir(d);
    return n;
}

/* ------------------------------------------------------------------ CRC-32C */
/* Bit by bit from the definition: reflected polynomial 0x1EDC6F41, init and final xor ~0. */
static uint32_t crc32c_ref(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

/* TensorFlow's mask, written out again so the reader below does not share the code under test */
static uint32_t mask_ref(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

static void test_crc32c(void) {
    /* RFC 3720 B.4 and the usual check value */
    unsigned char buf[48];
    CHECK_EQ(tsi_crc32c(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(tsi_crc32c(0, "", 0), 0);
    memset(buf, 0, 32);
    CHECK_EQ(tsi_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, 32);
    CHECK_EQ(tsi_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    CHECK_EQ(tsi_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)(31 - i);
    CHECK_EQ(tsi_crc32c(0, buf, 32), 0x113FDB5Cu);
    /* iSCSI read command PDU (RFC 3720 B.4) */
    static const unsigned char pdu[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    CHECK_EQ(tsi_crc32c(0, pdu, 48), 0xD9963A56u);
    /* TensorFlow's masked values, from tensorboard's own implementation:
     *   from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
     *   [hex(masked_crc32c(d)) for d in (b"", b"123456789", b"a")] */
    CHECK_EQ(tsi_crc32c_mask(tsi_crc32c(0, "", 0)), 0xa282ead8u);
    CHECK_EQ(tsi_crc32c_mask(tsi_crc32c(0, "123456789", 9)), 0xc78ab0e5u);
    CHECK_EQ(tsi_crc32c_mask(tsi_crc32c(0, "a", 1)), 0x28e46e78u);

    /* every offset and length against the bitwise definition, and split computations */
    unsigned char rnd[300];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof rnd; i++)
        rnd[i] = (unsigned char)((x = x * 1103515245 + 12345) >> 16);
    int bad = 0, bad_split = 0;
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof rnd; n += (n < 40 ? 1 : 37)) {
            uint32_t want = crc32c_ref(rnd + off, n);
            bad += tsi_crc32c(0, rnd + off, n) != want;
            size_t cut = n / 3;
            bad_split +=
                tsi_crc32c(tsi_crc32c(0, rnd + off, cut), rnd + off + cut, n - cut) != want;
        }
    CHECK_EQ(bad, 0);
    CHECK_EQ(bad_split, 0);
}

/* ------------------------------------------------------------------ event-file reader */
/* What one Event holds, as far as the logger writes it. */
typedef struct event {
    double wall_time;
    int64_t step;
    char file_version[32];
    char tag[512];
    float value;
    bool has_summary, has_value;
} event;

static bool get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return false;
        unsigned char b = *(*p)++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

static uint64_t get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Decodes one message of the Event / Summary / Summary.Value family (depth 0, 1, 2). */
static bool decode(const unsigned char *p, const unsigned char *end, int depth, event *ev) {
    while (p < end) {
        uint64_t key, v;
        if (!get_varint(&p, end, &key)) return false;
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        if (wire == 0) {
            if (!get_varint(&p, end, &v)) return false;
            if (depth == 0 && field == 2)
                ev->step = (int64_t)v;
            else
                return false;
        } else if (wire == 1) {
            if (end - p < 8 || depth != 0 || field != 1) return false;
            uint64_t bits = get_le(p, 8);
            memcpy(&ev->wall_time, &bits, 8);
            p += 8;
        } else if (wire == 5) {
            if (end - p < 4 || depth != 2 || field != 2) return false;
            uint32_t bits = (uint32_t)get_le(p, 4);
            memcpy(&ev->value, &bits, 4);
            ev->has_value = true;
            p += 4;
        } else if (wire == 2) {
            if (!get_varint(&p, end, &v) || v > (uint64_t)(end - p)) return false;
            const unsigned char *sub = p;
            p += v;
            if (depth == 0 && field == 3) {
                if (v >= sizeof ev->file_version) return false;
                memcpy(ev->file_version, sub, v);
                ev->file_version[v] = '\0';
            } else if (depth == 0 && field == 5) {
                ev->has_summary = true;
                if (!decode(sub, p, 1, ev)) return false;
            } else if (depth == 1 && field == 1) {
                if (!decode(sub, p, 2, ev)) return false;
            } else if (depth == 2 && field == 1) {
                if (v >= sizeof ev->tag) return false;
                memcpy(ev->tag, sub, v);
                ev->tag[v] = '\0';
            } else {
                return false;
            }
        } else {
            return false;
        }
    }
    return true;
}

/* Reads every record of an event file, checking the framing and both CRCs; returns the number of
 * events (-1 on a malformed file). raw[i] gets record i's data when raw is not NULL. */
static int read_events(const char *path, event *evs, int max, unsigned char **raw, size_t *raw_n) {
    size_t n;
    unsigned char *buf = read_all(path, &n);
    if (!buf) return -1;
    int count = 0;
    size_t pos = 0;
    while (pos < n) {
        if (n - pos < 12 || count >= max) goto bad;
        uint64_t len = get_le(buf + pos, 8);
        uint32_t len_crc = (uint32_t)get_le(buf + pos + 8, 4);
        if (len_crc != mask_ref(crc32c_ref(buf + pos, 8))) goto bad;
        if (len > n - pos - 12 || n - pos - 12 - len < 4) goto bad;
        const unsigned char *data = buf + pos + 12;
        if ((uint32_t)get_le(data + len, 4) != mask_ref(crc32c_ref(data, len))) goto bad;
        memset(&evs[count], 0, sizeof evs[count]);
        if (!decode(data, data + len, 0, &evs[count])) goto bad;
        if (raw) {
            raw[count] = malloc(len);
            memcpy(raw[count], data, len);
            raw_n[count] = len;
        }
        count++;
        pos += 12 + len + 4;
    }
    free(buf);
    return count;
bad:
    free(buf);
    return -1;
}

/* ------------------------------------------------------------------ one logging session */
typedef struct scalar_case {
    const char *tag;
    int64_t step;
    double value;
} scalar_case;

static char long_tag[301];

static bool same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static char **read_lines(const char *path, int *n) {
    size_t len;
    char *text = (char *)read_all(path, &len);
    *n = 0;
    if (!text) return NULL;
    char **lines = calloc(len + 1, sizeof *lines);
    size_t start = 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\n') {
            lines[*n] = malloc(i - start + 1);
            memcpy(lines[*n], text + start, i - start);
            lines[(*n)++][i - start] = '\0';
            start = i + 1;
        }
    CHECK_EQ(start, len); /* every line ends with a newline */
    free(text);
    return lines;
}

static void free_lines(char **lines, int n) {
    for (int i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

static void test_session(void) {
    memset(long_tag, 'x', 300);
    memcpy(long_tag, "long/", 5);
    const scalar_case cases[] = {
        {"train/loss", 12, 0.53},
        {"lr", -3, -1e-3},
        {"test/accuracy", 12, 1.0 / 3.0},
        {"we\"ird\\ \n\t\x01 \xc3\xa9", 5, 1e-300},
        {"big", 11, 1e300},
        {long_tag, (int64_t)1 << 40, 123456789.123},
        {"nan", 7, NAN},
        {"inf", 8, INFINITY},
        {"-inf", 9, -INFINITY},
        {"neg0", 10, -0.0},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    const char *dir = tmp_path("runs/a//b/");
    double t0 = now();
    ts_logger *lg = ts_logger_open(dir);
    CHECK(lg != NULL);
    CHECK_OK();
    if (!lg) return;
    char *ev_path[4];
    CHECK_EQ(event_files(tmp_path("runs/a/b"), ev_path, 4), 1);
    const char *jsonl = tmp_path("runs/a/b/metrics.jsonl");
    /* the first event (12 + 24 + 4 bytes) is on disk at once, the rest waits for a flush */
    CHECK_EQ(file_size(ev_path[0]), 40);
    for (int i = 0; i < nc; i++)
        CHECK(ts_logger_scalar(lg, cases[i].tag, cases[i].step, cases[i].value) == TS_OK);
    const char *keys[] = {"epoch", "train_loss", "test_acc", "bad"};
    const double vals[] = {3, 0.25, 0.8734, NAN};
    CHECK(ts_logger_record(lg, 3, 4, keys, vals) == TS_OK);
    CHECK(ts_logger_record(lg, 4, 0, NULL, NULL) == TS_OK);
    CHECK_EQ(file_size(jsonl), 0);
    CHECK_EQ(file_size(ev_path[0]), 40);
    CHECK(ts_logger_flush(lg) == TS_OK);
    double t1 = now();
    CHECK(file_size(jsonl) > 0);
    CHECK(file_size(ev_path[0]) > 40);
    CHECK(ts_logger_flush(lg) == TS_OK); /* nothing pending */
    ts_logger_close(lg);
    CHECK_OK();

    /* the event file, record by record */
    event evs[16];
    unsigned char *raw[16];
    size_t raw_n[16];
    int ne = read_events(ev_path[0], evs, 16, raw, raw_n);
    CHECK_EQ(ne, 1 + nc);
    if (ne != 1 + nc) return;
    CHECK_STREQ(evs[0].file_version, "brain.Event:2");
    CHECK(!evs[0].has_summary);
    CHECK(evs[0].wall_time >= floor(t0) && evs[0].wall_time <= t1);
    /* the bytes after wall_time, from the protobuf library TensorBoard uses:
     *   from tensorboard.compat.proto.event_pb2 import Event
     *   from tensorboard.compat.proto.summary_pb2 import Summary
     *   Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString().hex()
     *   Event(wall_time=1.0, step=12, summary=Summary(value=[Summary.Value(tag="train/loss",
     *         simple_value=0.53)])).SerializeToString().hex()     (and step=-3, "lr", -1e-3)
     * each begins 09 000000000000f03f (field 1, fixed64 1.0) */
    static const unsigned char want0[] = {0x1a, 0x0d, 'b', 'r', 'a', 'i', 'n', '.',
                                          'E',  'v',  'e', 'n', 't', ':', '2'};
    static const unsigned char want1[] = {0x10, 0x0c, 0x2a, 0x13, 0x0a, 0x11, 0x0a, 0x0a,
                                          't',  'r',  'a',  'i',  'n',  '/',  'l',  'o',
                                          's',  's',  0x15, 0x14, 0xae, 0x07, 0x3f};
    static const unsigned char want2[] = {0x10, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0x01, 0x2a, 0x0b, 0x0a, 0x09, 0x0a,
                                          0x02, 'l',  'r',  0x15, 0x6f, 0x12, 0x83, 0xba};
    CHECK(raw_n[0] == 9 + sizeof want0 && raw[0][0] == 0x09 &&
          memcmp(raw[0] + 9, want0, sizeof want0) == 0);
    CHECK(raw_n[1] == 9 + sizeof want1 && raw[1][0] == 0x09 &&
          memcmp(raw[1] + 9, want1, sizeof want1) == 0);
    CHECK(raw_n[2] == 9 + sizeof want2 && raw[2][0] == 0x09 &&
          memcmp(raw[2] + 9, want2, sizeof want2) == 0);
    for (int i = 0; i < ne; i++) free(raw[i]);
    for (int i = 0; i < nc; i++) {
        const event *e = &evs[1 + i];
        CHECK(e->has_summary && e->has_value);
        CHECK_STREQ(e->tag, cases[i].tag);
        CHECK_EQ(e->step, cases[i].step);
        double v = cases[i].value; /* past float's range TensorBoard gets an infinity */
        float want = !isfinite(v) || fabs(v) <= FLT_MAX ? (float)v : v > 0 ? INFINITY : -INFINITY;
        CHECK(same_double(e->value, want));
        CHECK(e->wall_time >= evs[0].wall_time && e->wall_time <= t1);
    }

    /* metrics.jsonl: the exact text of two lines, then every line through cJSON */
    int nl;
    char **lines = read_lines(jsonl, &nl);
    CHECK_EQ(nl, nc + 2);
    if (nl != nc + 2) {
        free_lines(lines, nl);
        return;
    }
    const char *prefix = "{\"step\": 12, \"tag\": \"train/loss\", \"value\": 0.53, \"wall_time\": ";
    CHECK(strncmp(lines[0], prefix, strlen(prefix)) == 0);
    const char *weird = "{\"step\": 5, \"tag\": \"we\\\"ird\\\\ \\n\\t\\u0001 \xc3\xa9\", "
                        "\"value\": 1e-300, \"wall_time\": ";
    CHECK(strncmp(lines[3], weird, strlen(weird)) == 0);
    CHECK_STREQ(
        lines[nc],
        "{\"step\": 3, \"epoch\": 3, \"train_loss\": 0.25, \"test_acc\": 0.8734, \"bad\": null}");
    CHECK_STREQ(lines[nc + 1], "{\"step\": 4}");
    for (int i = 0; i < nc; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        CHECK(j != NULL);
        if (!j) continue;
        cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
        cJSON *tag = cJSON_GetObjectItemCaseSensitive(j, "tag");
        cJSON *value = cJSON_GetObjectItemCaseSensitive(j, "value");
        cJSON *wall = cJSON_GetObjectItemCaseSensitive(j, "wall_time");
        CHECK(cJSON_IsNumber(step) && step->valuedouble == (double)cases[i].step);
        CHECK(cJSON_IsString(tag) && strcmp(tag->valuestring, cases[i].tag) == 0);
        if (isfinite(cases[i].value))
            CHECK(cJSON_IsNumber(value) && same_double(value->valuedouble, cases[i].value));
        else
            CHECK(cJSON_IsNull(value));
        /* the same instant in both files, exactly */
        CHECK(cJSON_IsNumber(wall) && wall->valuedouble == evs[1 + i].wall_time);
        cJSON_Delete(j);
    }
    cJSON *rec = cJSON_Parse(lines[nc]);
    CHECK(rec && cJSON_GetArraySize(rec) == 5);
    cJSON *f = rec ? rec->child : NULL;
    const char *rec_keys[] = {"step", "epoch", "train_loss", "test_acc", "bad"};
    for (int i = 0; f && i < 5; i++, f = f->next) {
        CHECK_STREQ(f->string, rec_keys[i]);
        if (i == 0)
            CHECK(f->valuedouble == 3);
        else if (i < 4)
            CHECK(same_double(f->valuedouble, vals[i - 1]));
        else
            CHECK(cJSON_IsNull(f));
    }
    cJSON_Delete(rec);
    free_lines(lines, nl);

    /* a second logger in the same folder (a resumed run): its own event file, the same metrics */
    lg = ts_logger_open(tmp_path("runs/a/b"));
    CHECK(lg != NULL);
    CHECK(ts_logger_scalar(lg, "resumed", 13, 2.0) == TS_OK);
    ts_logger_close(lg);
    CHECK_OK();
    char *ev2[4];
    CHECK_EQ(event_files(tmp_path("runs/a/b"), ev2, 4), 2);
    lines = read_lines(jsonl, &nl);
    CHECK_EQ(nl, nc + 3);
    if (nl == nc + 3)
        CHECK(strncmp(lines[nc + 2], "{\"step\": 13, \"tag\": \"resumed\", \"value\": 2, ", 42) ==
              0);
    free_lines(lines, nl);
    for (int k = 0; k < 2; k++) {
        int n2 = read_events(ev2[k], evs, 16, NULL, NULL);
        bool first = strcmp(ev2[k], ev_path[0]) == 0;
        CHECK_EQ(n2, first ? 1 + nc : 2);
        if (!first && n2 == 2) CHECK(strcmp(evs[1].tag, "resumed") == 0 && evs[1].step == 13);
        free(ev2[k]);
    }
    free(ev_path[0]);
}

/* ------------------------------------------------------------------ buffering */
static void test_autoflush(void) {
    const char *dir = tmp_path("many");
    ts_logger *lg = ts_logger_open(dir);
    CHECK(lg != NULL);
    if (!lg) return;
    const char *jsonl = tmp_path("many/metrics.jsonl");
    /* ~100 bytes a line: well past the 64 KiB the logger keeps before writing on its own */
    for (int i = 0; i < 2000; i++)
        CHECK(ts_logger_scalar(lg, "a fairly long tag/for the buffer", i, i * 0.5) == TS_OK);
    long early = file_size(jsonl);
    CHECK(early > 0);
    ts_logger_close(lg);
    CHECK_OK();
    CHECK(early < file_size(jsonl)); /* the tail waited for close */
    int nl;
    char **lines = read_lines(jsonl, &nl);
    CHECK_EQ(nl, 2000);
    int bad = 0;
    for (int i = 0; i < nl; i++) {
        char want[64];
        snprintf(want, sizeof want, "{\"step\": %d, \"tag\": \"a fairly long tag/for the buffer\"",
                 i);
        bad += strncmp(lines[i], want, strlen(want)) != 0;
    }
    CHECK_EQ(bad, 0);
    free_lines(lines, nl);
    char *ev[2];
    CHECK_EQ(event_files(dir, ev, 2), 1);
    static event evs[2001];
    CHECK_EQ(read_events(ev[0], evs, 2001, NULL, NULL), 2001);
    CHECK(evs[2000].step == 1999 && evs[2000].value == 999.5f);
    free(ev[0]);
}

/* ------------------------------------------------------------------ errors */
static void expect_io(const char *what, const char *path) {
    CHECK(strstr(ts_error_message(), what) != NULL);
    CHECK(strstr(ts_error_message(), path) != NULL);
    if (!strstr(ts_error_message(), what)) fprintf(stderr, "  message: %s\n", ts_error_message());
    CHECK_ERR(TS_ERR_IO);
}

static void test_errors(void) {
    /* arguments */
    CHECK(ts_logger_open(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_logger_open("") == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_logger_scalar(NULL, "x", 0, 1) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_logger_record(NULL, 0, 0, NULL, NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_logger_flush(NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_logger_close(NULL);
    CHECK_OK();
    const char *dir = tmp_path("args");
    ts_logger *lg = ts_logger_open(dir);
    CHECK(lg != NULL);
    if (lg) {
        CHECK(ts_logger_scalar(lg, NULL, 0, 1) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        CHECK(ts_logger_scalar(lg, "", 0, 1) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        const char *bad_utf8[] = {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"};
        for (int i = 0; i < 5; i++) {
            CHECK(ts_logger_scalar(lg, bad_utf8[i], 0, 1) == TS_ERR_ARG);
            CHECK(strstr(ts_error_message(), "UTF-8") != NULL);
            CHECK_ERR(TS_ERR_ARG);
        }
        const char *keys[] = {"a", NULL};
        const double v[] = {1, 2};
        CHECK(ts_logger_record(lg, 0, -1, keys, v) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        CHECK(ts_logger_record(lg, 0, 1, NULL, v) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        CHECK(ts_logger_record(lg, 0, 1, keys, NULL) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        CHECK(ts_logger_record(lg, 0, 2, keys, v) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        const char *bad_key[] = {"\x80"};
        CHECK(ts_logger_record(lg, 0, 1, bad_key, v) == TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
        ts_logger_close(lg);
        CHECK_OK();
        /* nothing was written by the refused calls */
        CHECK_EQ(file_size(tmp_path("args/metrics.jsonl")), 0);
    }

    /* the folder cannot be made: a file stands where it, or a parent, should be */
    char file[512]; /* kept to the end: tmp_path's buffers get reused */
    snprintf(file, sizeof file, "%s", tmp_path("a_file"));
    FILE *fp = fopen(file, "w");
    if (fp) fclose(fp);
    CHECK(ts_logger_open(file) == NULL);
    expect_io("Not a directory", file);
    const char *under = tmp_path("a_file/logs/run1");
    CHECK(ts_logger_open(under) == NULL);
    expect_io("Not a directory", under);
    /* metrics.jsonl cannot be opened: it is a folder */
    char blocked[512];
    snprintf(blocked, sizeof blocked, "%s", tmp_path("blocked"));
    mkdir(blocked, 0755);
    mkdir(tmp_path("blocked/metrics.jsonl"), 0755);
    CHECK(ts_logger_open(blocked) == NULL);
    expect_io("Is a directory", tmp_path("blocked/metrics.jsonl"));
    /* a read-only folder (root ignores permissions, so only checked otherwise) */
    if (geteuid() != 0) {
        const char *ro = tmp_path("readonly");
        mkdir(ro, 0555);
        CHECK(ts_logger_open(ro) == NULL);
        expect_io("Permission denied", ro);
        CHECK(ts_logger_open(tmp_path("readonly/sub")) == NULL);
        expect_io("Permission denied", tmp_path("readonly/sub"));
        rmdir(ro);
    }

    /* writes fail at the flush: the disk is full (metrics.jsonl leads to /dev/full) */
    const char *full = tmp_path("full");
    mkdir(full, 0755);
    const char *full_jsonl = tmp_path("full/metrics.jsonl");
    if (symlink("/dev/full", full_jsonl) == 0 && (lg = ts_logger_open(full))) {
        CHECK(ts_logger_scalar(lg, "train/loss", 1, 0.5) == TS_OK); /* buffered */
        CHECK(ts_logger_flush(lg) == TS_ERR_IO);
        expect_io("No space left on device", full_jsonl);
        /* later writes report the failure again; the event file goes on */
        CHECK(ts_logger_scalar(lg, "train/loss", 2, 0.25) == TS_ERR_IO);
        expect_io("failed earlier: No space left on device", full_jsonl);
        ts_logger_close(lg);
        CHECK_OK();
        char *ev[2];
        CHECK_EQ(event_files(full, ev, 2), 1);
        event evs[4];
        CHECK_EQ(read_events(ev[0], evs, 4, NULL, NULL), 3);
        free(ev[0]);
    }

    /* the file-size limit stops the event file (the first record fits, later ones do not) */
    const char *lim = tmp_path("limited");
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {300, old.rlim_max};
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
        lg = ts_logger_open(lim);
        CHECK(lg != NULL);
        if (lg) {
            for (int i = 0; i < 20; i++) ts_logger_scalar(lg, "train/accuracy", i, 0.5);
            CHECK_OK();
            CHECK(ts_logger_flush(lg) == TS_ERR_IO);
            expect_io("File too large", lim);
            ts_logger_close(lg);
            CHECK_OK();
        }
        setrlimit(RLIMIT_FSIZE, &old);
    }
    signal(SIGXFSZ, prev);
}

/* ------------------------------------------------------------------ a sample for TensorBoard */
/* Leaves logger_sample/ in the working folder (build/tests/) for tools/check_tfevents.py, which
 * opens it with TensorBoard's own reader: train/loss = 1/(1+s), train/accuracy = s/10, lr = 0.1
 * at steps 0..9. */
static void write_sample(void) {
    const char *dir = "logger_sample";
    remove_tree(dir);
    ts_logger *lg = ts_logger_open(dir);
    CHECK(lg != NULL);
    if (!lg) return;
    for (int s = 0; s < 10; s++) {
        CHECK(ts_logger_scalar(lg, "train/loss", s, 1.0 / (1 + s)) == TS_OK);
        CHECK(ts_logger_scalar(lg, "train/accuracy", s, s / 10.0) == TS_OK);
        CHECK(ts_logger_scalar(lg, "lr", s, 0.1) == TS_OK);
    }
    ts_logger_close(lg);
    CHECK_OK();
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_logger_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot create a scratch folder");
    test_crc32c();
    test_session();
    test_autoflush();
    test_errors();
    write_sample();
    remove_tree(tmpdir);
    return ts_test_finish();
}
