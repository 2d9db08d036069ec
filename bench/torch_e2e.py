#!/usr/bin/env python3
"""End-to-end PyTorch (CPU, float32, batch 1) timing of a whole network, eager and/or
TorchScript, with the very models and inputs that scripts/export-models.py exports.

usage: torch_e2e.py MODEL --threads T [--repeats R] [--mode eager|script|both]
                    [--cwm-dir DIR --cwm-input FILE]

With --cwm-dir, the network compiled by `cwm compile` (DIR/model_runner and
DIR/model_weights.bin, built with --build) is timed in the same rounds as a third mode, "cwm":
each round runs the runner for a batch of inferences on --cwm-input (the inputs that
export-models.py wrote) and takes its median; the ratios eager/cwm and script/cwm are printed.

Protocol: build (seed --seed), trace+freeze+optimize_for_inference for TorchScript,
--warmup calls per mode, then R interleaved rounds (eager, script, eager, script, ...);
each round times a batch of calls lasting >= --min-round-ms (batch size calibrated in
warm-up) and records ms per call. Prints per-mode median (with min/max of the rounds),
then one machine-readable line per mode on stdout:

    torch_e2e<TAB>MODEL<TAB>MODE<TAB>THREADS<TAB>MEDIAN_MS

Process setup as bench/torch_anchor.py (bench/torch_env.py, before torch is imported): glibc
malloc kept from trimming (re-exec once), OpenBLAS/OpenMP pinned to T threads, passive OpenMP
waiting for BLAS-bound BERT at T > 1.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch_env

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT_MODELS = os.path.join(HERE, "..", "scripts", "export-models.py")
NETWORKS = ("resnet50", "bert_base")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="PyTorch end-to-end timing (eager / TorchScript) of the networks "
                    "exported by scripts/export-models.py. Machine-readable result lines: "
                    "torch_e2e<TAB>MODEL<TAB>MODE<TAB>THREADS<TAB>MEDIAN_MS")
    ap.add_argument("model", choices=NETWORKS, metavar="MODEL",
                    help="one of: " + ", ".join(NETWORKS))
    ap.add_argument("--threads", type=int, required=True, help="torch/BLAS/OpenMP threads")
    ap.add_argument("--repeats", type=int, default=7,
                    help="timed rounds per mode (default 7); median over them")
    ap.add_argument("--mode", choices=("eager", "script", "both"), default="both")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up calls per mode (default 3)")
    ap.add_argument("--min-round-ms", type=float, default=200.0,
                    help="each round runs a batch of calls lasting at least this (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="export-models.py seed (default 0)")
    ap.add_argument("--cwm-dir", help="a directory written by cwm compile --build (times its runner too)")
    ap.add_argument("--cwm-name", default="model", help="the library's name in --cwm-dir (default model)")
    ap.add_argument("--cwm-input", help="the inputs file for the runner (MODEL.in.bin of export-models.py)")
    args = ap.parse_args(argv)
    args.threads = max(1, args.threads)
    args.repeats = max(1, args.repeats)
    if args.cwm_dir and not args.cwm_input:
        ap.error("--cwm-dir needs --cwm-input")
    return args


def cwm_runner(args):
    """A function timing `calls` inferences of the compiled network; returns ms per call."""
    import re
    import subprocess
    runner = os.path.join(args.cwm_dir, args.cwm_name + "_runner")
    weights = os.path.join(args.cwm_dir, args.cwm_name + "_weights.bin")
    for f in (runner, weights, args.cwm_input):
        if not os.path.exists(f):
            sys.exit("torch_e2e: %s does not exist (build it with cwm compile --build)" % f)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

    def run(calls):
        out = subprocess.run([runner, weights, "-i", args.cwm_input, "-n", str(calls)], env=env,
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"median ([0-9.]+) ms", out)
        if not m:
            sys.exit("torch_e2e: unexpected runner output: %r" % out)
        return float(m.group(1))
    return run


def prepare_process(args):
    """torch_env's setup (the same as bench/torch_anchor.py's); must run before torch is imported."""
    torch_env.prepare_process(args.threads, args.model == "bert_base")


def load_export_models():
    spec = importlib.util.spec_from_file_location("export_models", EXPORT_MODELS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(args):
    import torch

    torch.set_num_threads(args.threads)
    em = load_export_models()
    spec = em.build(args.model, args.seed)
    model, inputs = spec.model.eval(), tuple(spec.inputs)

    fns = {}
    if args.mode in ("eager", "both"):
        def eager():
            with torch.inference_mode():
                return model(*inputs)
        fns["eager"] = eager
    if args.mode in ("script", "both"):
        with torch.no_grad():
            traced = torch.jit.trace(model, inputs, check_trace=False)
            scripted = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))

        def script():
            with torch.no_grad():
                return scripted(*inputs)
        fns["script"] = script
        # The TorchScript module must compute what eager does.
        with torch.no_grad():
            ref, got = model(*inputs), scripted(*inputs)
        err = float((ref - got).abs().max())
        print("# script vs eager: max abs diff %.3g (max|ref| %.3g)"
              % (err, float(ref.abs().max())), file=sys.stderr)

    # Warm-up; calibrate the calls per round from the last warm-up call.
    per_round = {}
    cwm = cwm_runner(args) if args.cwm_dir else None
    if cwm:
        per_round["cwm"] = max(3, int(args.min_round_ms / max(cwm(3), 1e-3) + 0.999))
    for mode, fn in fns.items():
        for _ in range(max(1, args.warmup)):
            t0 = time.perf_counter()
            fn()
            el = time.perf_counter() - t0
        per_round[mode] = max(1, int(args.min_round_ms / 1e3 / max(el, 1e-6) + 0.999))

    samples = {mode: [] for mode in fns}
    if cwm:
        samples["cwm"] = []
    for _ in range(args.repeats):
        if cwm:
            samples["cwm"].append(cwm(per_round["cwm"]))
        for mode, fn in fns.items():
            n = per_round[mode]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[mode].append((time.perf_counter() - t0) * 1e3 / n)

    for mode, ms in samples.items():
        print("# %s %s threads=%d: median %.3f ms/inference (min %.3f, max %.3f; %d rounds "
              "x %d calls)" % (args.model, mode, args.threads, statistics.median(ms), min(ms),
                               max(ms), len(ms), per_round[mode]), file=sys.stderr)
    for mode, ms in samples.items():
        print("torch_e2e\t%s\t%s\t%d\t%.4f" % (args.model, mode, args.threads,
                                               statistics.median(ms)))
    if cwm:
        c = statistics.median(samples["cwm"])
        for mode in fns:
            print("torch_e2e_ratio\t%s\t%s/cwm\t%d\t%.3f" % (args.model, mode, args.threads,
                                                              statistics.median(samples[mode]) / c))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    ARGS = parse_args()
    prepare_process(ARGS)
    sys.exit(main(ARGS))
