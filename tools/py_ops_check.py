#!/usr/bin/env python3
"""py_ops_check.py — one implementation of each op, in C: every public Python callable of the
`tessera` package that computes must reach a TS_API function through one call of the extension
(tessera._C), not compose several ops in Python (docs/PYTHON.md, issue 76).

    PYTHONPATH=build/python tools/py_ops_check.py [--list] [--update]

It reads every module of python/tessera (ast) and classifies each public module-level function and
each public method of a public class:
  - binding: calls into tessera._C (or forwards to one other op) with argument handling around it;
  - composition: two or more op steps in Python: calls of tessera's ops (its public functions and
    _C's), calls of Tensor methods that compute, and arithmetic or comparison operators applied to
    the function's parameters or to values computed from them.
Compositions must be listed in tools/py_ops_allow.txt, in one of its two sections: `glue`
(argument parsing, containers, modules that call ops as a user's program would: one comment line
says why for each group) and `pending` (an op still composed in Python that is to move into C;
the list only shrinks). The check fails on a composition that is not listed (a new Python-only
op), and on a listed name that is no longer a composition or no longer exists (so the list
stays true). --list prints every composition with its steps; --update rewrites the pending
section from what is found (review the diff). The counts are printed at the end.

The classification is syntactic, so it errs both ways: a Python number's arithmetic on a
parameter counts as a step, and a Tensor method called through another name does not. The
allow-list absorbs the first kind; the second is why the step threshold is two, not one.
"""
import argparse
import ast
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PKG = os.path.join(ROOT, "python", "tessera")
ALLOW = os.path.join(ROOT, "tools", "py_ops_allow.txt")

# Tensor methods that only describe a tensor or convert a Python value: never a compute step
DESCRIBE = {"dim", "size", "numel", "item", "tolist", "stride", "is_contiguous", "data_ptr",
            "element_size", "nelement", "ndimension", "is_floating_point", "is_complex",
            "get_device", "storage_offset", "requires_grad_", "detach", "retain_grad",
            "register_hook", "is_set_to", "untyped_storage", "__len__", "keys", "values", "items",
            "append", "extend", "get", "pop", "update", "format", "join", "split", "startswith",
            "endswith", "replace", "lower", "upper", "strip", "copy"}
ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.MatMult, ast.FloorDiv, ast.Mod)
CMP = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def runtime_names():
    """tessera's op names: _C's callables and the Tensor methods that compute"""
    import tessera
    c_names = {n for n in dir(tessera._C) if callable(getattr(tessera._C, n, None))}
    t_methods = {n for n in dir(tessera.Tensor) if not n.startswith("__")} - DESCRIBE
    return c_names, t_methods


def modules():
    for dirpath, dirs, files in os.walk(PKG):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
                yield rel[:-len(".__init__")] if rel.endswith(".__init__") else rel, path


class Steps(ast.NodeVisitor):
    """the op steps of one function body (nested functions and lambdas included)"""

    def __init__(self, params, ops, c_names, t_methods, c_aliases):
        self.tainted = set(params)  # names holding a parameter or a value computed from one
        self.ops, self.c_names, self.t_methods, self.c_aliases = ops, c_names, t_methods, c_aliases
        self.steps, self.c_calls = [], 0

    def _touches(self, node):
        return any(isinstance(n, ast.Name) and n.id in self.tainted for n in ast.walk(node))

    def visit_Assign(self, node):
        self.generic_visit(node)
        if self._touches(node.value):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.tainted.add(n.id)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id in self.c_aliases:
            self.c_calls += 1
        elif isinstance(f, ast.Name) and f.id in self.ops:
            self.steps.append(f.id)
        elif isinstance(f, ast.Attribute) and f.attr in self.t_methods and self._touches(f.value):
            self.steps.append("." + f.attr)
        self.generic_visit(node)

    def visit_BinOp(self, node):
        # text: "..." % args, name + "_g" (a string literal on either side)
        text = any(isinstance(o, ast.JoinedStr) or
                   (isinstance(o, ast.Constant) and isinstance(o.value, str))
                   for o in (node.left, node.right))
        if isinstance(node.op, ARITH) and not text and \
                (self._touches(node.left) or self._touches(node.right)):
            self.steps.append(type(node.op).__name__.lower())
        self.generic_visit(node)

    def visit_Compare(self, node):
        if any(isinstance(o, CMP) for o in node.ops) and self._touches(node):
            self.steps.append("compare")
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.USub) and self._touches(node.operand):
            self.steps.append("neg")
        self.generic_visit(node)


def functions(tree):
    """(qualified name, function node) of the public module-level functions and public methods
    of public classes"""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and (not sub.name.startswith("_")
                                                         or sub.name == "__call__"):
                    yield node.name + "." + sub.name, sub


def bound_names(tree, c_names):
    """the names a module binds at its top level (defs, classes, imports, assignments): a call of
    a name it does not bind is a Python builtin's (max, abs, round), never tessera's op"""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    out |= c_names if isinstance(node, ast.ImportFrom) and node.module \
                        and node.module.endswith("_C") else set()
                else:
                    out.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.add(n.id)
    return out


def c_aliases(tree):
    out = {"_C"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name == "_C":
                    out.add(a.asname or a.name)
    return out


def scan():
    c_names, t_methods = runtime_names()
    trees = {}
    public = set(c_names)
    for mod, path in modules():
        with open(path, encoding="utf-8") as fh:
            trees[mod] = ast.parse(fh.read(), path)
        public.update(n for n, _ in functions(trees[mod]) if "." not in n)
    found = {}
    for mod, tree in trees.items():
        al = c_aliases(tree)
        ops = public & bound_names(tree, c_names)
        for name, fn in functions(tree):
            a = fn.args
            params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg != "self"]
            params += [p.arg for p in (a.vararg, a.kwarg) if p]
            v = Steps(params, ops, c_names, t_methods, al)
            for stmt in fn.body:
                v.visit(stmt)
            if len(v.steps) >= 2:
                found[mod + "." + name] = v.steps
    return found


def read_allow():
    sections, cur = {"glue": set(), "pending": set()}, None
    with open(ALLOW, encoding="utf-8") as fh:
        for line in fh:
            s = line.split("#", 1)[0].strip()
            if line.startswith("[") and line.strip().endswith("]"):
                cur = line.strip()[1:-1]
                continue
            if s and cur in sections:
                sections[cur].add(s)
    return sections


def write_pending(found, allow):
    with open(ALLOW, encoding="utf-8") as fh:
        text = fh.read()
    head = text.split("[pending]", 1)[0]
    pending = sorted(n for n in found if n not in allow["glue"])
    with open(ALLOW, "w", encoding="utf-8") as fh:
        fh.write(head + "[pending]\n" + "".join(n + "\n" for n in pending))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--update", action="store_true")
    args = ap.parse_args()
    found = scan()
    allow = read_allow()
    if args.list:
        for name in sorted(found):
            print("%-60s %s" % (name, " ".join(found[name][:8])))
    if args.update:
        write_pending(found, allow)
        allow = read_allow()
    listed = allow["glue"] | allow["pending"]
    new = sorted(n for n in found if n not in listed)
    stale = sorted(n for n in listed if n not in found)
    for n in new:
        print("py_ops_check: %s composes ops in Python (%s): write it as one C function "
              "(a TS_API ts_* op) that the binding calls, or list it in tools/py_ops_allow.txt "
              "with the reason" % (n, " ".join(found[n][:6])))
    for n in stale:
        print("py_ops_check: %s is listed in tools/py_ops_allow.txt but is no longer a Python "
              "composition: take it off the list" % n)
    print("== Python compositions: %d (glue %d, pending a C implementation %d); new %d, stale %d"
          % (len(found), len(allow["glue"] & set(found)), len(allow["pending"] & set(found)),
             len(new), len(stale)))
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
