/* profile.c — `tessera profile-view trace.json -o out.html` (a self-contained page: the trace
 * inline, a timeline, the per-op table, the transfer table and the collectives table, no
 * network) and the trainer's `--profile DIR --profile-steps A:B` (docs/PROFILING.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tessera/profiler.h>

#include "cli.h"

/* The page: the trace goes between HEAD and TAIL inside <script type="application/json">. */
static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Tessera profile</title>\n"
    "<style>body{font:13px sans-serif;margin:16px}table{border-collapse:collapse;margin:8px 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child"
    "{text-align:left}th{background:#eee;cursor:pointer}#tl{position:relative;overflow-x:auto;"
    "border:1px solid #ccc}.ev{position:absolute;height:14px;font-size:10px;overflow:hidden;"
    "white-space:nowrap;border:1px solid #fff;box-sizing:border-box;color:#000}.lbl{position:"
    "absolute;left:0;font-size:11px;background:#fff8;z-index:2}</style></head><body>\n"
    "<h1>Tessera profile</h1><p id=\"sum\"></p><p id=\"status\">not rendered (the page's "
    "script did not run)</p><h2>Timeline</h2><div>zoom <input id=\"zoom\" "
    "type=\"range\" min=\"0\" max=\"8\" step=\"0.25\" value=\"0\"></div><div id=\"tl\"></div>\n"
    "<h2>Ops</h2><table id=\"ops\"></table><h2>Transfers</h2><table id=\"xfer\"></table>\n"
    "<h2>Collectives</h2><table id=\"coll\"></table>\n"
    "<script id=\"trace\" type=\"application/json\">\n";

static const char PAGE_TAIL[] =
    "\n</script>\n<script>\n"
    "window.onerror=function(m){document.getElementById('status').textContent='error: '+m;};\n"
    "const T=JSON.parse(document.getElementById('trace').textContent);\n"
    "const ev=(T.traceEvents||T).filter(e=>e.ph==='X');\n"
    "const names={};(T.traceEvents||T).filter(e=>e.ph==='M').forEach(e=>{names[e.name+':'+e.pid+"
    "':'+(e.name==='thread_name'?e.tid:'')]=e.args.name;});\n"
    "const fmt=u=>u>=1e6?(u/1e6).toFixed(3)+'s':u>=1e3?(u/1e3).toFixed(3)+'ms':u.toFixed(3)+"
    "'us';\n"
    "const esc=s=>String(s).replace(/[&<>\"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','\"':"
    "'&quot;'}[c]));\n"
    "let t0=Infinity,t1=0;ev.forEach(e=>{t0=Math.min(t0,e.ts);t1=Math.max(t1,e.ts+e.dur);});\n"
    "if(!ev.length){t0=0;t1=1;}\n"
    "document.getElementById('sum').textContent=ev.length+' events over '+fmt(t1-t0);\n"
    "const colors={cpu_op:'#8cf',backward:'#fc8',user_annotation:'#ccc',dataloader:'#c9f',"
    "gpu_memcpy:'#f88',kernel:'#8d8',collective:'#fd6'};\n"
    "function timeline(){const tl=document.getElementById('tl');tl.innerHTML='';\n"
    " const W=Math.max(800,tl.clientWidth-20)*Math.pow(2,+document.getElementById('zoom')."
    "value);\n"
    " const tracks={};ev.forEach(e=>{const k=e.pid+':'+e.tid;(tracks[k]=tracks[k]||[]).push(e)"
    ";});\n"
    " let y=0;Object.keys(tracks).sort().forEach(k=>{const es=tracks[k].sort((a,b)=>a.ts-b.ts||"
    "b.dur-a.dur);\n"
    "  const [pid,tid]=k.split(':');const lbl=document.createElement('div');lbl.className='lbl';"
    "lbl.style.top=y+'px';\n"
    "  lbl.textContent=(names['process_name:'+pid+':']||pid)+' / '+(names['thread_name:'+pid+"
    "':'+tid]||tid);tl.appendChild(lbl);y+=16;\n"
    "  const open=[];let maxd=0;es.forEach(e=>{while(open.length&&open[open.length-1]<=e.ts)"
    "open.pop();const d=open.length;open.push(e.ts+e.dur);maxd=Math.max(maxd,d);\n"
    "   const div=document.createElement('div');div.className='ev';div.style.left=((e.ts-t0)/"
    "(t1-t0)*W)+'px';\n"
    "   div.style.width=Math.max(1,e.dur/(t1-t0)*W)+'px';div.style.top=(y+d*15)+'px';"
    "div.style.background=colors[e.cat]||'#ddd';\n"
    "   div.textContent=e.name;div.title=e.name+' '+fmt(e.dur)+' '+JSON.stringify(e.args||{});"
    "tl.appendChild(div);});\n"
    "  y+=(maxd+1)*15+6;});tl.style.height=(y+4)+'px';\n"
    " const inner=document.createElement('div');inner.style.width=W+'px';inner.style.height='1px"
    "';tl.appendChild(inner);}\n"
    "function table(id,cols,rows,sortcol){const t=document.getElementById(id);let sc=sortcol;\n"
    " function draw(){rows.sort((a,b)=>typeof a[sc]==='string'?String(a[sc]).localeCompare(b[sc]"
    "):sc==='ts'?a[sc]-b[sc]:b[sc]-a[sc]);\n"
    "  t.innerHTML='<tr>'+cols.map((c,i)=>'<th data-i=\"'+i+'\">'+esc(c[0])+'</th>').join('')+"
    "'</tr>'+rows.map(r=>'<tr>'+cols.map(c=>'<td>'+esc(c[2]?c[2](r[c[1]]):r[c[1]])+'</td>')."
    "join('')+'</tr>').join('');\n"
    "  t.querySelectorAll('th').forEach(th=>th.onclick=()=>{sc=cols[+th.dataset.i][1];draw();});"
    "}\n"
    " draw();}\n"
    "const agg={};let selfTot=0;ev.filter(e=>e.cat!=='gpu_memcpy').forEach(e=>{const k=e.cat+"
    "'|'+e.name;\n"
    " const r=agg[k]=agg[k]||{name:e.name,kind:e.cat,calls:0,total:0,self:0};r.calls++;r.total+="
    "e.dur;\n"
    " const s=e.cat==='kernel'?0:(e.args&&e.args.self_us!==undefined)?e.args.self_us:e.dur;"
    "r.self+=s;selfTot+=s;});"
    "\n"
    "const rows=Object.values(agg);rows.forEach(r=>{r.avg=r.total/r.calls;r.selfpct=100*r.self/"
    "(selfTot||1);});\n"
    "table('ops',[['Name','name'],['Kind','kind'],['Self CPU %','selfpct',v=>v.toFixed(2)+'%'],"
    "['Self CPU','self',fmt],['CPU total','total',fmt],['CPU time avg','avg',fmt],['# of Calls',"
    "'calls']],rows,'total');\n"
    "const xr=ev.filter(e=>e.cat==='gpu_memcpy').map(e=>({name:e.name,kind:e.args.kind,src:"
    "e.args.src,dst:e.args.dst,bytes:e.args.bytes,mem:e.args.memory,dur:e.dur,gbps:"
    "e.args['GB/s'],ts:e.ts-t0}));\n"
    "table('xfer',[['At','ts',fmt],['Kind','kind'],['From','src'],['To','dst'],['Bytes','bytes']"
    ",['Memory','mem'],['Time','dur',fmt],['GB/s','gbps',v=>(+v).toFixed(3)]],xr,'ts');\n"
    "const cr=ev.filter(e=>e.cat==='collective').map(e=>({name:e.name,rank:e.args.Rank,size:"
    "e.args['Group size'],bytes:e.args.bytes,dur:e.dur,ts:e.ts-t0}));\n"
    "table('coll',[['At','ts',fmt],['Name','name'],['Rank','rank'],['Group size','size'],"
    "['Bytes','bytes'],['Time','dur',fmt]],cr,'ts');\n"
    "document.getElementById('zoom').oninput=timeline;timeline();\n"
    "document.getElementById('status').textContent='rendered '+ev.length+' events, '+"
    "document.querySelectorAll('#tl .lbl').length+' tracks';\n"
    "</script></body></html>\n";

char *tcli_read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *g = realloc(buf, 2 * cap + 1);
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = 0;
    *n = len;
    return buf;
}

void tcli_put_script_text(FILE *f, const char *text, size_t n) {
    /* "</" cannot end the script element early: JSON reads "<\/" as the same characters */
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '<' && i + 1 < n && text[i + 1] == '/') {
            fputs("<\\/", f);
            i++;
        } else {
            fputc(text[i], f);
        }
    }
}

int tcli_profile_view(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: tessera profile-view trace.json -o out.html\n"
                   "  a self-contained HTML page (no network): timeline, per-op table, "
                   "transfers\n");
            return TCLI_OK;
        }
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc)
                return tcli_fail(TCLI_USAGE, "profile-view: %s: missing value", argv[i]);
            out = argv[++i];
        } else if (argv[i][0] == '-' || in) {
            return tcli_fail(TCLI_USAGE,
                             "profile-view: unexpected argument '%s' (usage: tessera "
                             "profile-view trace.json -o out.html)",
                             argv[i]);
        } else {
            in = argv[i];
        }
    }
    if (!in || !out)
        return tcli_fail(TCLI_USAGE, "profile-view: needs a trace and -o FILE.html (tessera "
                                     "profile-view trace.json -o out.html)");
    size_t n = 0;
    char *text = tcli_read_all(in, &n);
    if (!text) return tcli_fail(TCLI_FAIL, "profile-view: cannot read %s", in);
    cJSON *j = cJSON_Parse(text);
    bool ok = j && (cJSON_IsArray(j) || cJSON_IsArray(cJSON_GetObjectItem(j, "traceEvents")));
    cJSON_Delete(j);
    if (!ok) {
        free(text);
        return tcli_fail(TCLI_FAIL,
                         "profile-view: %s is not a Chrome trace (JSON with "
                         "traceEvents)",
                         in);
    }
    FILE *f = fopen(out, "wb");
    if (!f) {
        free(text);
        return tcli_fail(TCLI_FAIL, "profile-view: cannot write %s", out);
    }
    fputs(PAGE_HEAD, f);
    tcli_put_script_text(f, text, n);
    fputs(PAGE_TAIL, f);
    free(text);
    if (ferror(f) | (fclose(f) != 0)) return tcli_fail(TCLI_FAIL, "profile-view: writing %s", out);
    printf("wrote %s\n", out);
    return TCLI_OK;
}

/* ------------------------------------------------------------------ train --profile */
static bool prof_on, prof_range;

/* step: the 1-based number of the step about to begin (its loader wait included) */
void tcli_profile_step_begin(const tcli_opts *o, int64_t step) {
    if (!o->profile_dir || ts_error()) return;
    if (step == o->profile_first && !prof_on) {
        if (ts_profiler_start(&(ts_profiler_opts){.record_shapes = true, .profile_memory = true}) !=
            TS_OK)
            return;
        prof_on = true;
    }
    if (prof_on && !prof_range && step <= o->profile_last) {
        char name[48];
        snprintf(name, sizeof name, "ProfilerStep#%lld", (long long)step);
        ts_profiler_range_push(name);
        prof_range = true;
    }
}

/* Ends the range of step (when profiled); after the last step (or at the run's end: last < 0)
 * writes DIR/trace.json. Returns -1, or an exit status. */
int tcli_profile_step_end(const tcli_opts *o, int64_t step) {
    if (!o->profile_dir || !prof_on) return -1;
    if (prof_range) {
        prof_range = false;
        ts_profiler_range_pop();
    }
    if (step >= 0 && step < o->profile_last) return -1;
    prof_on = false;
    if (ts_profiler_stop() != TS_OK) return tcli_fail_ts(TCLI_FAIL, "--profile");
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.json", o->profile_dir);
    if (mkdir(o->profile_dir, 0777) != 0 && errno != EEXIST)
        return tcli_fail(TCLI_FAIL, "--profile: cannot create %s: %s", o->profile_dir,
                         strerror(errno));
    if (ts_profiler_export_chrome(path) != TS_OK) return tcli_fail_ts(TCLI_FAIL, "--profile");
    printf("profile of steps %lld-%lld: %s (tessera profile-view %s -o profile.html)\n",
           (long long)o->profile_first, (long long)(step >= 0 ? step : o->profile_last), path,
           path);
    ts_profile_free(ts_profiler_take());
    return -1;
}
