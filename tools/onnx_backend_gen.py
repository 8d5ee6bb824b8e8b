#!/usr/bin/env python3
"""onnx_backend_gen.py — writes ONNX's backend node test cases (model.onnx + test_data_set_N, the
layout of Debian's libonnx-testdata) from the installed onnx package's generators, keeping the cases
whose default-domain opset lies in [--min-opset, --max-opset]. Newer onnx wheels ship the node
cases as Python only; `backend-test-tools generate-data` writes the model suites alone.

Usage: /opt/torch2/bin/torch-python tools/onnx_backend_gen.py OUT [--min-opset 18] [--max-opset 21]
then:  TS_ONNX_TESTDATA=OUT TS_ONNX_KNOWN=tests/onnx_backend_known_opset21.txt \\
       build/tests/test_onnx_backend
"""
import argparse
import os
import sys
import types

import onnx
from onnx.backend.test import cmd_tools
from onnx.backend.test.case import node


def opset_of(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--min-opset", type=int, default=18)
    ap.add_argument("--max-opset", type=int, default=21)
    a = ap.parse_args()
    cases = [c for c in node.collect_testcases(None)
             if c.model is not None and a.min_opset <= opset_of(c.model) <= a.max_opset]
    # cmd_tools.generate_data writes what model_test.collect_testcases returns
    cmd_tools.model_test = types.SimpleNamespace(collect_testcases=lambda: cases)
    cmd_tools.generate_data(argparse.Namespace(output=a.out))
    print(f"onnx {onnx.__version__}: {len(cases)} node cases at opsets {a.min_opset}-{a.max_opset}"
          f" written to {a.out}/node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
