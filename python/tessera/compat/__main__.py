"""python -m tessera.compat [--force] (script.py | -m module | -c code) [args...]

Runs the program as `python script.py` / `python -m module` / `python -c code` would, with
sys.argv set the same way, after tessera.compat.install(): its `import torch` is Tessera."""
import os
import runpy
import sys

USAGE = ("usage: python -m tessera.compat [--force] (script.py | -m module | -c code) [args...]\n"
         "  runs the program with `import torch` / `import torchvision` answered by Tessera;\n"
         "  --force: shadow a real PyTorch that is installed (else that is an error)")


def main(argv):
    force = False
    while argv and argv[0] in ("--force", "-h", "--help"):
        if argv[0] == "--force":
            force = True
            argv = argv[1:]
        else:
            print(USAGE)
            return 0
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    from . import install, RealTorchError
    try:
        install(force=force)
    except RealTorchError as e:
        print("tessera.compat: %s" % e, file=sys.stderr)
        return 1
    if argv[0] == "-m":
        if len(argv) < 2:
            print("tessera.compat: -m needs a module name\n" + USAGE, file=sys.stderr)
            return 2
        sys.argv = [argv[1]] + argv[2:]  # run_module(alter_sys=True) sets argv[0] to the file
        if sys.path[0] != os.getcwd() and sys.path[0] != "":
            sys.path.insert(0, os.getcwd())
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        if len(argv) < 2:
            print("tessera.compat: -c needs a program\n" + USAGE, file=sys.stderr)
            return 2
        sys.argv = ["-c"] + argv[2:]
        main_mod = sys.modules["__main__"]
        g = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None,
             "__spec__": None, "__loader__": getattr(main_mod, "__loader__", None)}
        sys.path[0] = ""
        exec(compile(argv[1], "<string>", "exec"), g)
    else:
        script = argv[0]
        if not os.path.exists(script):
            print("tessera.compat: can't open file %r: no such file" % script, file=sys.stderr)
            return 2
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
