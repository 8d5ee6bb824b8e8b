#!/usr/bin/env python3
"""api_conventions.py — how each public C function reports failure, checked against the convention
of docs/decisions/0025-c-api-results.md.

    tools/api_conventions.py            the exceptions not on the allow-list (exit 1 if any), and
                                        allow-list entries that are no longer exceptions
    tools/api_conventions.py --all      every TS_API function with its class, one a line
    tools/api_conventions.py --summary  the count of each class

Every function the public headers mark TS_API (the declarations tools/abi_check.py reads) gets one
class from its return type, and, where its definition in src/ is found, from what its body does:

  object      returns a pointer: NULL and the error recorded on failure
  status      returns ts_status: TS_OK, or the error's code
  predicate   returns bool: false on a bad argument, with the error recorded
  number      returns an integer or a floating number: on failure -1 for a signed integer, NAN
              for a floating one, with the error recorded
  value       returns a struct or enum by value: the header says what a failure gives
  destructor  void ts_..._free / _release: NULL-safe; misuse is recorded (TS_ERR_STATE)
  void        returns nothing: only for what cannot fail

The exceptions it reports (each must be fixed, or listed in ALLOW below with its reason: the same
list as the decision record's "Exceptions kept"):

  void-fails   a void function (not a destructor) that records an error: the caller would learn of
               the failure only from ts_error()
  sentinel     a signed integer or floating function that records an error but whose body never
               returns -1 / NAN
  constructor  a function returning a new object of a type with a destructor (ts_T_free /
               ts_T_close / ts_T_destroy) whose name does not end in _new (_new_ex, _new2,
               _new_params...), _open, _load, _begin or _take; the 0.1 names kept as aliases of
               their conventional names (ALIASES) are allowed while the new name is declared

"Records an error": the function's body calls tsi_error_set, tsi_kernel_oom or tsi_error_append,
or calls a function of src/ that does, two calls deep (a static helper of its own file first, else
the library function of that name): the checks a public function delegates to. Deeper failures
are not followed; functions defined by a macro (most ops) are classed by their return type alone.
It reads the sources as text (comments and strings blanked), without a compiler: about 1.5
CPU-seconds.
"""
import argparse
import collections
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abi_check  # noqa: E402  (the header parser: one reading of the declarations)

ROOT = abi_check.ROOT

SIGNED = {"int", "int64_t", "int32_t", "long", "ptrdiff_t"}
FLOATING = {"double", "float"}
UNSIGNED = {"size_t", "uint64_t", "uint32_t", "uintptr_t", "unsigned"}

# name -> (exception kind, reason): the exceptions kept, the same list as the decision record's
# (docs/decisions/0025-c-api-results.md, "Exceptions kept"). A new exception is fixed, or added
# here and there with its reason.
ALLOW = {}


def _allow(kind, reason, *names):
    for n in names:
        ALLOW[n] = (kind, reason)


_allow("void-fails", "a bracket: the region opens or closes whatever the arguments, so begin and "
       "end stay paired; a nesting overflow, a bad argument or an end without its begin is "
       "recorded (TS_ERR_STATE / _ARG / _DTYPE) and checked once after the region",
       "ts_device_push", "ts_device_pop", "ts_scope_end", "ts_scope_resume", "ts_autocast_begin",
       "ts_autocast_begin_ex", "ts_autocast_end", "ts_no_grad_end", "ts_ddp_no_sync_begin",
       "ts_ddp_no_sync_end", "ts_fsdp_no_sync_begin", "ts_fsdp_no_sync_end")
_allow("void-fails", "prints for a person (stdout); a NULL argument is recorded",
       "ts_print", "ts_module_summary")
_allow("sentinel", "a hook handle: > 0, or 0 on error (handles start at 1), as its header says",
       "ts_register_tensor_hook", "ts_register_post_accumulate_grad_hook",
       "ts_module_register_forward_pre_hook", "ts_module_register_forward_hook")
_allow("constructor", "returns its argument (the call changes it in place), also on failure",
       "ts_module_to", "ts_module_to_dtype", "ts_sequential_append")
_allow("constructor", "a borrowed handle: the device's default or current stream, never freed",
       "ts_cuda_default_stream", "ts_cuda_current_stream")

# The 0.1 names of constructors (decision 0025): each is declared at the end of its header as the
# alias of its conventional name, which src/*/*_names.c defines over it; removed at 1.0.
ALIASES = {"ts_dist_new_group": "ts_dist_group_new", "ts_event_file_create": "ts_event_file_open",
           "ts_adamw_decay_groups": "ts_adamw_new_decay_groups"}
for _k in ("sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "radam",
           "asgd", "rprop"):
    ALIASES["ts_" + _k] = "ts_%s_new" % _k
    ALIASES["ts_%s_params" % _k] = "ts_%s_new_params" % _k
for _k in ("step_lr", "multistep_lr", "cosine_lr", "linear_lr", "onecycle_lr", "warmup_cosine_lr",
           "tensor_dataset", "idx_dataset", "mnist", "cifar10", "csv_dataset", "text_dataset",
           "image_folder", "to_tensor", "normalize", "normalize3", "random_crop", "random_hflip",
           "compose", "distributed_sampler", "ddp", "fsdp", "data_parallel", "resnet18",
           "resnet34", "resnet50", "resnet_cifar", "resnet20"):
    ALIASES["ts_" + _k] = "ts_%s_new" % _k

# what a constructor's name may end with: _new (and its variants _new_ex, _new2, _new_params),
# _open for an object bound to a file or folder (closed with _close), _load for a module read
# from a file, _begin for a bracket's frame, _take for what a collector hands over
CONSTRUCTOR_NAME = re.compile(r"_(new(_[a-z0-9_]+)?|new2|open|load(_buffer)?|begin|take)$")


def strip_c(text):
    """The C text with comments, string and character literals blanked (same length, newlines
    kept), so that braces and names are read from code only."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def definitions():
    """[(name, file, body text)] for every function defined at file scope in src/*.c."""
    found = []
    files = sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True))
    for path in files:
        code = strip_c(open(path, errors="replace").read())
        # preprocessor lines out (their braces and semicolons are not statements)
        code = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*",
                      lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
        rel = os.path.relpath(path, ROOT)
        depth, stmt_start, i = 0, 0, 0
        while i < len(code):
            c = code[i]
            if c == "{":
                if depth == 0:
                    head = code[stmt_start:i]
                    m = re.search(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\([^;{}]*\)\s*$", head)
                    if m and "=" not in head[:m.start()]:
                        j, d = i + 1, 1
                        while j < len(code) and d:
                            d += {"{": 1, "}": -1}.get(code[j], 0)
                            j += 1
                        found.append((m.group(1), rel, code[i:j]))
                        i, stmt_start = j, j
                        continue
                depth += 1
            elif c == "}":
                depth = max(depth - 1, 0)
                if depth == 0:
                    stmt_start = i + 1
            elif c == ";" and depth == 0:
                stmt_start = i + 1
            i += 1
    return found


RECORDS = re.compile(r"\btsi_(error_set|kernel_oom|error_append)\s*\(")
CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def recording(defs, depth=2):
    """name -> (file, body, records an error) for each public function: its body records one, or
    a function it calls does, followed DEPTH calls deep (a static helper of its file first, else
    the library's function of that name): the checks a public function delegates to."""
    local, glob_ = {}, {}
    for name, rel, body in defs:
        callees = set(CALL.findall(body)) - {name}
        local[(rel, name)] = (bool(RECORDS.search(body)), callees)
        if name not in glob_ or not name.startswith(("ts_", "tsi_")):
            glob_.setdefault(name, (rel, name))
    rec = {k: v[0] for k, v in local.items()}
    for _ in range(depth):
        nxt = dict(rec)
        for (rel, name), (direct, callees) in local.items():
            if nxt[(rel, name)]:
                continue
            for c in callees:
                key = (rel, c) if (rel, c) in local else glob_.get(c)
                if key and rec.get(key):
                    nxt[(rel, name)] = True
                    break
        rec = nxt
    out = {}
    for name, rel, body in defs:
        if name.startswith("ts_") and name not in out:
            out[name] = (rel, body, rec[(rel, name)])
    return out


def public_functions():
    """(header, line, name, return type text, the comment text around the declaration)"""
    out = []
    for h in abi_check.headers():
        text = open(h).read()
        lines = text.split("\n")
        code_lines = strip_c(text).split("\n")
        for start, name, _ in abi_check.declarations(h):
            stmt = " ".join(code_lines[start:start + 12])
            k = stmt.find(name + "(")
            ret = re.sub(r"\s+", " ", stmt[:k].replace("TS_API", "")).strip()
            ret = re.sub(r"^extern\b\s*", "", ret)
            # the declaration's comment: the block just above and the rest of its lines
            j = start - 1
            while j >= 0 and lines[j].strip() and not lines[j].rstrip().endswith(";") \
                    and not lines[j].rstrip().endswith("}"):
                j -= 1
            end = start
            while end < len(lines) and ";" not in code_lines[end]:
                end += 1
            doc = " ".join(lines[j + 1:end + 1])
            out.append((os.path.relpath(h, ROOT), start + 1, name, ret, doc))
    return out


def base_type(ret):
    t = re.sub(r"\b(const|struct|static|inline)\b", "", ret).strip()
    return re.sub(r"\s+", " ", t)


def classify(fns, defs, destructible):
    """[(header, line, name, class, exception kind or None, detail)]"""
    rows = []
    for header, line, name, ret, doc in fns:
        t = base_type(ret)
        src, body, records = defs.get(name, (None, "", False))
        exc, detail = None, ""
        if t.endswith("*"):
            cls = "object"
            pointee = t.rstrip("* ").strip()
            new_object = pointee in destructible and "borrowed" not in doc.lower()
            if new_object and not CONSTRUCTOR_NAME.search(name):
                exc, detail = "constructor", "returns a new %s" % pointee
        elif t == "ts_status":
            cls = "status"
        elif t == "bool":
            cls = "predicate"
        elif t == "void" and re.search(r"_(free|release)$", name):
            cls = "destructor"  # NULL-safe, cannot fail; misuse (a child module) is recorded
        elif t == "void":
            cls = "void"
            if records:
                exc, detail = "void-fails", "records an error, returns nothing"
        elif t in SIGNED or t in FLOATING:
            cls = "number"
            sentinel = r"\bNAN\b|\bnan\s*\(" if t in FLOATING else \
                r"return\b[^;]*-\s*1(LL|L)?\s*;|\?\s*-\s*1(LL|L)?\s*:"
            if records and not re.search(sentinel, body):
                exc, detail = "sentinel", "%s: records an error, never returns %s" % (
                    t, "NAN" if t in FLOATING else "-1")
        elif t in UNSIGNED:
            cls = "number"
        else:
            cls = "value"
        rows.append((header, line, name, cls, exc, detail, src))
    return rows


def destructible_types(fns):
    """pointee types T with a destructor: a public `void ts_x_free(T *)` / close / release"""
    types = set()
    for header, line, name, ret, doc in fns:
        if re.search(r"_(free|close|destroy)$", name):
            m = re.search(re.escape(name) + r"\s*\(\s*(?:const\s+)?([A-Za-z_][A-Za-z0-9_ ]*?)\s*\*",
                          doc)
            if m:
                types.add(re.sub(r"^struct\s+", "", m.group(1)).strip())
    types.discard("ts_tensor")
    return types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="every function with its class")
    ap.add_argument("--summary", action="store_true", help="the count of each class")
    a = ap.parse_args()
    fns = public_functions()
    defs = recording(definitions())
    rows = classify(fns, defs, destructible_types(fns))
    if a.all:
        for header, line, name, cls, exc, detail, src in rows:
            print("%s:%d: %s: %s%s" % (header, line, name, cls,
                                       " [%s: %s]" % (exc, detail) if exc else ""))
    counts = collections.Counter(r[3] for r in rows)
    if a.summary or a.all:
        print("api_conventions: %d public functions: %s" % (
            len(rows), ", ".join("%s %d" % kv for kv in counts.most_common())))
        print("api_conventions: %d definitions found in src/ (the others: macros, CUDA stubs)"
              % len(defs))
    rc = 0
    exceptions = [r for r in rows if r[4]]
    for header, line, name, cls, exc, detail, src in exceptions:
        allowed = ALLOW.get(name)
        if (allowed and allowed[0] == exc) or (exc == "constructor" and name in ALIASES):
            continue
        print("%s:%d: %s: %s (%s; defined in %s)" % (header, line, name, exc, detail, src))
        rc = 1
    seen = {r[2]: r[4] for r in rows}
    for name, (kind, reason) in sorted(ALLOW.items()):
        if seen.get(name) != kind:
            print("api_conventions: %s is allowed as '%s' but is %s" % (
                name, kind, "not declared" if name not in seen else "no longer such an exception"))
            rc = 1
    for old, new in sorted(ALIASES.items()):
        if old not in seen or new not in seen:
            print("api_conventions: the alias %s -> %s: %s is not declared" % (
                old, new, new if new not in seen else old))
            rc = 1
    n_allowed = sum(1 for r in exceptions
                    if ALLOW.get(r[2], (None,))[0] == r[4] or r[2] in ALIASES)
    print("api_conventions: %d functions, %d exceptions (%d on the allow-list)%s" % (
        len(rows), len(exceptions), n_allowed,
        "" if rc else ": every other function follows docs/decisions/0025-c-api-results.md"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
