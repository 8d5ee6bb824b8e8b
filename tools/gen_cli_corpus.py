#!/usr/bin/env python3
"""gen_cli_corpus.py — writes the seed corpora of two fuzz targets: tests/fuzz/corpus/args (the
`tessera` command line, NUL-separated arguments: tests/fuzz/fuzz_args.c) and
tests/fuzz/corpus/csv_num (one CSV cell each: tests/fuzz/fuzz_csv_num.c). ctest replays both.

Usage: python3 tools/gen_cli_corpus.py   (from the repository root; rewrites both folders)
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "tests", "fuzz")

ARGS = {
    "empty": [],
    "help": ["--help"],
    "train_help": ["train", "-h"],
    "devices": ["devices"],
    "train_defaults": ["train"],
    "train_full": ["train", "--model", "mlp", "--data", "mnist", "--data-dir", "d", "--epochs", "3",
                   "--batch-size", "32", "--lr", "0.01", "--momentum", "0.5", "--seed", "7",
                   "--workers", "2", "--threads", "1", "--checkpoint", "ck", "--resume",
                   "--checkpoint-every", "10", "--log", "logs", "--log-every", "5",
                   "--progress", "none", "--schedule", "constant", "--warmup", "3"],
    "train_equals": ["train", "--epochs=2", "--lr=1e-3", "--optimizer=adamw", "--weight-decay=0"],
    "train_devices": ["train", "--devices", "sim:0,sim:1", "--amp", "--amp-dtype", "bf16"],
    "train_devices_repeat": ["train", "--devices", "sim:0,sim:0"],
    "train_devices_empty_item": ["train", "--devices", "sim:0,,sim:1"],
    "train_devices_many": ["train", "--devices", ",".join("sim:%d" % i for i in range(20))],
    "train_device_cuda": ["train", "--device", "cuda:3"],
    "train_device_sim_big": ["train", "--device", "sim:63"],
    "train_gpt": ["train", "--data", "text", "--context", "64", "--layers", "2", "--heads", "2",
                  "--dim", "32", "--dropout", "0.1", "--grad-accum", "2", "--label-smoothing",
                  "0.1", "--clip-grad", "1", "--time-limit", "5"],
    "train_gpt_dim": ["train", "--data", "text", "--dim", "30"],
    "train_csv": ["train", "--model", "mlp", "--data", "csv", "--csv-target", "label",
                  "--test-fraction", "0.25"],
    "eval": ["eval", "--checkpoint", "ck", "--model", "lenet"],
    "generate": ["generate", "--checkpoint", "ck", "--prompt", "The ", "--tokens", "10",
                 "--temperature", "0.8", "--top-k", "5"],
    "generate_greedy_topk": ["generate", "--checkpoint", "ck", "--greedy", "--top-k", "3"],
    "bad_int": ["train", "--epochs", "12abc"],
    "int_overflow": ["train", "--batch-size", "99999999999999999999"],
    "neg_zero": ["train", "--lr", "-0"],
    "nan": ["train", "--lr", "nan"],
    "inf": ["train", "--weight-decay", "inf"],
    "hex_real": ["train", "--momentum", "0x1p-1"],
    "flag_value": ["train", "--amp=yes"],
    "missing_value": ["train", "--lr"],
    "empty_value": ["train", "--data-dir", ""],
    "unknown": ["train", "--frobnicate"],
    "prefix_option": ["train", "--ep", "3"],
    "stray": ["train", "stray"],
    "wrong_command": ["fly"],
    "other_command_option": ["eval", "--epochs", "3", "--checkpoint", "x"],
    "choice": ["train", "--model", "resnet"],
    "progress": ["train", "--progress", "fancy"],
    "seed_max": ["train", "--seed", "9223372036854775807"],
    "seed_neg": ["train", "--seed", "-1"],
    # a crash once found: a newline inside an argument must not split the reported line
    "newline-in-argument": ["train", "-\n", "rgenerate", "--checkpoint", "ck", "--greedy",
                            "--top-k", "", "nan"],
    "run": ["run", "model.onnx", "--device", "sim:0"],
    "info": ["info", "model.onnx"],
    "export": ["export", "--model", "gpt", "-o", "gpt.onnx"],
    "export_no_output": ["export", "--model", "lenet"],
    "convert": ["convert", "model.pt", "out.safetensors"],
    "convert_no_output": ["convert", "model.pt"],
    "convert_two_positional": ["convert", "devices", "sim:01,simn"],
    "train_profile": ["train", "--profile", "prof", "--profile-steps", "2:3"],
    "train_profile_steps_alone": ["train", "--profile-steps", "2:3"],
    "train_profile_steps_bad": ["train", "--profile", "prof", "--profile-steps", "3:2"],
    "train_offload_optimizer": ["train", "--device", "sim:0", "--offload-optimizer",
                                "--optimizer", "adamw"],
    "train_offload_optimizer_graph": ["train", "--offload-optimizer", "--graph"],
    "train_max_memory": ["train", "--model", "gpt", "--max-memory", "sim:0=2MiB,sim:1=1.5GB,cpu=64GiB"],
    "train_max_memory_bad": ["train", "--max-memory", "sim:0=2XB,,gpu=1"],
    "train_max_memory_devices": ["train", "--max-memory", "cpu=1GiB", "--devices", "sim:0,sim:1"],
}

CELLS = {
    "int": "42", "neg": "-3", "plus": "+7", "dec": "3.25", "lead_dot": ".5", "trail_dot": "5.",
    "exp": "1e3", "exp_neg": "2.5E-3", "exp_plus": "1e+2", "exp_empty": "1e", "exp_sign_only": "1e+",
    "hex": "0x1.8p3", "hex_no_p": "0x1F", "hex_empty": "0x", "inf": "inf", "infinity": "-Infinity",
    "infin": "infin", "nan": "NaN", "nan_payload": "nan(0x1_a)", "nan_open": "nan(",
    "spaces": "  12  ", "tabs": "\t-1\t", "vtab": "\x0b5\x0c", "only_space": "   ", "empty": "",
    "dot": ".", "two_dots": "1.2.3", "two_signs": "+-1", "sign_space": "- 1", "letters": "abc",
    "trailing_text": "12kg", "comma": "1,5", "quote": '3"', "nul": "1\x002", "huge": "1e400",
    "tiny": "1e-400", "denormal": "1e-40", "float_max": "3.4028235e38", "past_float": "3.5e38",
    "long_digits": "0." + "3" * 60, "many_zeros": "0" * 300 + "1", "too_long": "1" * 600,
    "big_exp": "1e999999999999999999", "class_max": "16777215", "class_past": "16777216",
    "class_frac": "2.5", "class_neg_zero": "-0", "utf8": "\u00bd",
}


def write(folder, files):
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    for name, blob in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(blob)


def main():
    write(os.path.join(FUZZ, "corpus", "args"),
          {k: b"\0".join(a.encode() for a in v) for k, v in ARGS.items()})
    write(os.path.join(FUZZ, "corpus", "csv_num"), {k: v.encode() for k, v in CELLS.items()})
    opts = sorted({a for v in ARGS.values() for a in v if a.startswith("--")} |
                  {"train", "eval", "generate", "devices", "run", "info", "export", "convert", "sim:",
                   "cuda:", "cpu", "="})
    with open(os.path.join(FUZZ, "args.dict"), "w") as f:
        f.write("# option names for fuzz_args (tools/gen_cli_corpus.py)\n")
        for o in opts:
            f.write('"%s"\n' % o)
    print("wrote %d argument lists, %d cells and %d dictionary words" % (len(ARGS), len(CELLS),
                                                                        len(opts)))


if __name__ == "__main__":
    main()
