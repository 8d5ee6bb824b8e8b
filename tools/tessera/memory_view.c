/* memory_view.c — `tessera memory-view snapshot.json -o page.html`: a memory snapshot
 * (ts_memory_snapshot, tessera.cuda.memory._snapshot() / _dump_snapshot, PyTorch's layout) as a
 * self-contained HTML page (no network): per device the totals and fragmentation, a map of its
 * segments and blocks, and a table of the live blocks, largest first, with their stacks. The
 * tables are plain HTML written here (a parser checks them without a browser); the map is drawn by
 * the inline script from the snapshot, which the page carries as JSON (docs/PROFILING.md). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_DEVICES 256
#define MAX_FRAMES  8 /* stack frames shown per block */

static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Tessera memory snapshot</title>\n"
    "<style>body{font:13px sans-serif;margin:16px}table{border-collapse:collapse;margin:8px 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;vertical-align:top}"
    "td.l,th.l{text-align:left}th{background:#eee}.stack{font:11px monospace;text-align:left;"
    "white-space:pre}.dev{margin:4px 0 12px}.seg{display:inline-block;position:relative;"
    "height:22px;border:1px solid #444;margin:1px;vertical-align:top;background:#eee}.blk{position:"
    "absolute;top:0;height:100%;box-sizing:border-box;border-right:1px solid #fff}.active_"
    "allocated{background:#e66}.active_pending_free{background:#fb5}.inactive{background:#9d9}"
    "</style></head><body>\n<h1>Tessera memory snapshot</h1>\n"
    "<p>Blocks: <span class=\"blk active_allocated\" style=\"position:static;padding:0 6px\">"
    "allocated</span> <span class=\"blk inactive\" style=\"position:static;padding:0 6px\">free "
    "(reserved)</span>. Fragmentation: 1 - largest free block / free bytes of the device's "
    "segments.</p>\n";

static const char PAGE_TAIL[] =
    "\n</script>\n<script>\n"
    "window.onerror=function(m){document.getElementById('status').textContent='error: '+m;};\n"
    "const S=JSON.parse(document.getElementById('snapshot').textContent);\n"
    "const map=document.getElementById('map');const devs={};\n"
    "(S.segments||[]).forEach(s=>{const d=s.device_name||('cuda:'+s.device);"
    "(devs[d]=devs[d]||[]).push(s);});\n"
    "let nseg=0,nblk=0;\n"
    "Object.keys(devs).sort().forEach(d=>{const segs=devs[d];"
    "const big=Math.max(...segs.map(s=>s.total_size||1));\n"
    " const h=document.createElement('h3');h.textContent=d;map.appendChild(h);\n"
    " const row=document.createElement('div');row.className='dev';row.dataset.device=d;"
    "map.appendChild(row);\n"
    " segs.forEach(s=>{const e=document.createElement('div');e.className='seg';nseg++;\n"
    "  const W=Math.max(24,600*Math.sqrt((s.total_size||1)/big));e.style.width=W+'px';\n"
    "  e.title=(s.segment_type||'')+' segment at 0x'+Number(s.address).toString(16)+', '+"
    "s.total_size+' bytes';\n"
    "  (s.blocks||[]).forEach(b=>{const x=document.createElement('div');nblk++;\n"
    "   x.className='blk '+(b.state||'inactive');"
    "x.style.left=(W*(b.address-s.address)/(s.total_size||1))+'px';\n"
    "   x.style.width=Math.max(1,W*b.size/(s.total_size||1))+'px';x.title=b.state+' '+b.size+"
    "' bytes'+(b.frames&&b.frames.length?'\\n'+b.frames.filter(f=>f.filename).concat("
    "b.frames.filter(f=>!f.filename)).slice(0,8).map(f=>f.name+(f.filename?"
    "' '+f.filename+':'+f.line:'')).join('\\n'):'');e.appendChild(x);});\n"
    "  row.appendChild(e);});});\n"
    "document.getElementById('status').textContent='rendered '+nseg+' segments, '+nblk+"
    "' blocks';\n"
    "</script></body></html>\n";

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void put_esc(FILE *f, const char *s) {
    for (; s && *s; s++) switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
}

/* a segment's device as the page names it: device_name, else PyTorch's cuda index */
static void seg_device(const cJSON *seg, char *out, size_t cap) {
    const char *name = str(seg, "device_name");
    if (name)
        snprintf(out, cap, "%s", name);
    else
        snprintf(out, cap, "cuda:%d", (int)num(seg, "device"));
}

static bool is_free(const cJSON *blk) {
    const char *st = str(blk, "state");
    return !st || !strcmp(st, "inactive");
}

static void human(char *out, size_t cap, double b) {
    if (b >= 1 << 30)
        snprintf(out, cap, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20)
        snprintf(out, cap, "%.2f MiB", b / (1 << 20));
    else if (b >= 1 << 10)
        snprintf(out, cap, "%.2f KiB", b / (1 << 10));
    else
        snprintf(out, cap, "%.0f B", b);
}

typedef struct dev_total {
    char name[64];
    int segments, blocks, live;
    double reserved, allocated, free_bytes, largest_free;
} dev_total;

static dev_total *total_of(dev_total *t, int *n, const char *name) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    if (*n == MAX_DEVICES) return NULL;
    dev_total *d = &t[(*n)++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    return d;
}

/* the device's row of the snapshot's "devices" list (capacity, peaks), or NULL */
static const cJSON *device_info(const cJSON *root, const char *name) {
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        const char *n = str(d, "device");
        if (n && !strcmp(n, name)) return d;
    }
    return NULL;
}

static void write_totals(FILE *f, const cJSON *root, const cJSON *segs) {
    static dev_total t[MAX_DEVICES];
    int n = 0;
    const cJSON *seg, *blk;
    cJSON_ArrayForEach(seg, segs) {
        char name[64];
        seg_device(seg, name, sizeof name);
        dev_total *d = total_of(t, &n, name);
        if (!d) continue;
        d->segments++;
        d->reserved += num(seg, "total_size");
        cJSON_ArrayForEach(blk, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) {
            double sz = num(blk, "size");
            d->blocks++;
            if (is_free(blk)) {
                d->free_bytes += sz;
                if (sz > d->largest_free) d->largest_free = sz;
            } else {
                d->allocated += sz;
                d->live++;
            }
        }
    }
    fputs("<h2>Totals</h2>\n<table id=\"totals\">\n<tr><th class=\"l\">Device</th><th>Segments"
          "</th><th>Blocks</th><th>Live blocks</th><th>Reserved</th><th>Allocated</th><th>Free "
          "in segments</th><th>Largest free block</th><th>Fragmentation</th><th>Peak allocated"
          "</th><th>Capacity</th></tr>\n",
          f);
    for (int i = 0; i < n; i++) {
        const dev_total *d = &t[i];
        const cJSON *info = device_info(root, d->name);
        char r[32], a[32], fr[32], lf[32], pk[32], cap[32];
        human(r, sizeof r, d->reserved);
        human(a, sizeof a, d->allocated);
        human(fr, sizeof fr, d->free_bytes);
        human(lf, sizeof lf, d->largest_free);
        human(pk, sizeof pk, num(info, "peak_allocated"));
        human(cap, sizeof cap, num(info, "capacity"));
        double frag = d->free_bytes > 0 ? 1.0 - d->largest_free / d->free_bytes : 0.0;
        fprintf(f, "<tr data-device=\"");
        put_esc(f, d->name);
        fprintf(f,
                "\" data-reserved=\"%.0f\" data-allocated=\"%.0f\" data-free=\"%.0f\" "
                "data-largest-free=\"%.0f\"><td class=\"l\">",
                d->reserved, d->allocated, d->free_bytes, d->largest_free);
        put_esc(f, d->name);
        fprintf(f,
                "</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s"
                "</td><td>%.1f%%</td><td>%s</td><td>%s</td></tr>\n",
                d->segments, d->blocks, d->live, r, a, fr, lf, 100.0 * frag, info ? pk : "-",
                info && num(info, "capacity") > 0 ? cap : "-");
    }
    fputs("</table>\n", f);
}

/* one live block, for sorting */
typedef struct live {
    const cJSON *seg, *blk;
    double size;
} live;

static int by_size(const void *pa, const void *pb) {
    const live *a = pa, *b = pb;
    return a->size > b->size ? -1 : a->size < b->size;
}

/* The frames with a file (a binding's: the Python lines of the call) first, then the C frames,
 * at most MAX_FRAMES in all. */
static void write_frames(FILE *f, const cJSON *frames) {
    int i = 0, n = cJSON_GetArraySize(frames);
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *fr;
        cJSON_ArrayForEach(fr, frames) {
            const char *file = str(fr, "filename");
            if ((file && *file) != (pass == 0)) continue;
            if (i == MAX_FRAMES) {
                fprintf(f, "... %d more", n - i);
                return;
            }
            put_esc(f, str(fr, "name") ? str(fr, "name") : "?");
            if (file && *file) {
                fputc(' ', f);
                put_esc(f, file);
                fprintf(f, ":%d", (int)num(fr, "line"));
            }
            fputc('\n', f);
            i++;
        }
    }
}

static bool write_live(FILE *f, const cJSON *segs) {
    size_t n = 0, k = 0;
    const cJSON *seg, *blk;
    cJSON_ArrayForEach(seg, segs)
        cJSON_ArrayForEach(blk, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) n += !is_free(blk);
    live *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return false;
    cJSON_ArrayForEach(seg, segs) cJSON_ArrayForEach(
        blk, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) if (!is_free(blk) && k < n) v[k++] =
        (live){seg, blk, num(blk, "size")};
    qsort(v, k, sizeof *v, by_size);
    fputs("<h2>Live blocks, largest first</h2>\n<table id=\"blocks\">\n<tr><th class=\"l\">"
          "Device</th><th>Address</th><th>Size</th><th>Bytes</th><th class=\"l\">State</th><th>"
          "Stream</th><th class=\"l\">Segment</th><th class=\"l\">Allocated at</th></tr>\n",
          f);
    for (size_t i = 0; i < k; i++) {
        char dev[64], h[32];
        seg_device(v[i].seg, dev, sizeof dev);
        human(h, sizeof h, v[i].size);
        const char *state = str(v[i].blk, "state");
        const char *type = str(v[i].seg, "segment_type");
        fprintf(f, "<tr><td class=\"l\">");
        put_esc(f, dev);
        fprintf(f, "</td><td>0x%" PRIx64 "</td><td>%s</td><td>%.0f</td><td class=\"l\">",
                (uint64_t)num(v[i].blk, "address"), h, v[i].size);
        put_esc(f, state);
        fprintf(f, "</td><td>%.0f</td><td class=\"l\">0x%" PRIx64 " ", num(v[i].seg, "stream"),
                (uint64_t)num(v[i].seg, "address"));
        put_esc(f, type ? type : "");
        fputs("</td><td class=\"stack\">", f);
        const cJSON *frames = cJSON_GetObjectItemCaseSensitive(v[i].blk, "frames");
        if (cJSON_GetArraySize(frames) > 0)
            write_frames(f, frames);
        else
            fputs("(no stack: _record_memory_history() before allocating records one)", f);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    free(v);
    return true;
}

/* checks the snapshot's shape; NULL when fine, else what is wrong */
static const char *check_snapshot(const cJSON *root) {
    if (!cJSON_IsObject(root)) return "not a JSON object";
    const cJSON *segs = cJSON_GetObjectItemCaseSensitive(root, "segments"), *seg, *blk;
    if (!cJSON_IsArray(segs)) return "no \"segments\" list";
    cJSON_ArrayForEach(seg, segs) {
        if (!cJSON_IsObject(seg) || !cJSON_IsNumber(cJSON_GetObjectItem(seg, "total_size")) ||
            !cJSON_IsNumber(cJSON_GetObjectItem(seg, "address")))
            return "a segment without total_size or address";
        const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(seg, "blocks");
        if (blocks && !cJSON_IsArray(blocks)) return "a segment whose blocks are not a list";
        cJSON_ArrayForEach(blk, blocks) if (!cJSON_IsObject(blk) ||
                                            !cJSON_IsNumber(cJSON_GetObjectItem(
                                                blk, "size"))) return "a block without a size";
    }
    return NULL;
}

static const char USAGE[] = "usage: tessera memory-view snapshot.json -o page.html";

int tcli_memory_view(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n  a self-contained HTML page (no network) of a memory snapshot "
                   "(ts_memory_snapshot, tessera.cuda.memory._dump_snapshot): totals and "
                   "fragmentation per device, the segment map, live blocks with stacks\n",
                   USAGE);
            return TCLI_OK;
        }
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc)
                return tcli_fail(TCLI_USAGE, "memory-view: %s: missing value", argv[i]);
            out = argv[++i];
        } else if (argv[i][0] == '-' || in) {
            return tcli_fail(TCLI_USAGE, "memory-view: unexpected argument '%s' (%s)", argv[i],
                             USAGE);
        } else {
            in = argv[i];
        }
    }
    if (!in || !out)
        return tcli_fail(TCLI_USAGE, "memory-view: needs a snapshot and -o FILE.html (%s)", USAGE);
    size_t n = 0;
    char *text = tcli_read_all(in, &n);
    if (!text) return tcli_fail(TCLI_FAIL, "memory-view: cannot read %s", in);
    cJSON *root = cJSON_Parse(text);
    free(text);
    const char *bad = root ? check_snapshot(root) : "not JSON";
    if (bad) {
        cJSON_Delete(root);
        return tcli_fail(TCLI_FAIL,
                         "memory-view: %s is not a memory snapshot (%s; expected the JSON of "
                         "ts_memory_snapshot or tessera.cuda.memory._dump_snapshot)",
                         in, bad);
    }
    char *json = cJSON_PrintUnformatted(root);
    FILE *f = json ? fopen(out, "wb") : NULL;
    if (!f) {
        free(json);
        cJSON_Delete(root);
        return json ? tcli_fail(TCLI_FAIL, "memory-view: cannot write %s", out)
                    : tcli_fail(TCLI_FAIL, "memory-view: out of host memory");
    }
    const cJSON *segs = cJSON_GetObjectItemCaseSensitive(root, "segments");
    fputs(PAGE_HEAD, f);
    fprintf(f, "<p id=\"sum\">%d segments from ", cJSON_GetArraySize(segs));
    put_esc(f, in);
    fputs("</p><p id=\"status\">not rendered (the page's script did not run)</p>\n", f);
    write_totals(f, root, segs);
    fputs("<h2>Segments and blocks</h2>\n<div id=\"map\"></div>\n", f);
    bool ok = write_live(f, segs);
    fputs("<script id=\"snapshot\" type=\"application/json\">\n", f);
    tcli_put_script_text(f, json, strlen(json));
    fputs(PAGE_TAIL, f);
    free(json);
    cJSON_Delete(root);
    if (!ok) {
        fclose(f);
        return tcli_fail(TCLI_FAIL, "memory-view: out of host memory");
    }
    if (ferror(f) | (fclose(f) != 0)) return tcli_fail(TCLI_FAIL, "memory-view: writing %s", out);
    printf("wrote %s\n", out);
    return TCLI_OK;
}
