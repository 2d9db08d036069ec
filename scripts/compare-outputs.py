#!/usr/bin/env python3
"""Compares a network's outputs with the PyTorch reference written by export-models.py.

Both files hold the graph outputs as raw little-endian float32, concatenated in
graph-output order; NAME.json (from export-models.py) gives each output's name and shape.
For every output it prints the max absolute error and that error relative to max|ref|;
an output passes when

    max|got - ref| <= atol + rtol * max|ref|      (defaults: rtol 1e-3, atol 1e-5)

and got has no NaN/Inf. Exit status: 0 all outputs pass, 1 some output fails,
2 bad usage or unreadable/mis-sized files.
"""
import argparse
import json
import sys

import numpy as np


class InputError(Exception):
    pass


def load(path, outputs, what):
    data = np.fromfile(path, dtype="<f4")
    want = sum(int(np.prod(o["shape"], dtype=np.int64)) for o in outputs)
    if data.size != want:
        raise InputError("%s %s: %d floats, expected %d (%s)" % (
            what, path, data.size, want,
            ", ".join("%s %s" % (o["name"], o["shape"]) for o in outputs)))
    arrays, off = [], 0
    for o in outputs:
        n = int(np.prod(o["shape"], dtype=np.int64))
        arrays.append(data[off:off + n].reshape(o["shape"]))
        off += n
    return arrays


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Compare float32 network outputs GOT against the reference REF. "
                    "An output passes when max|got-ref| <= ATOL + RTOL * max|ref| and got "
                    "is finite. Exit 0: all pass; 1: some output fails; 2: usage/file error.")
    ap.add_argument("ref", metavar="REF.out.bin", help="reference outputs (export-models.py)")
    ap.add_argument("got", metavar="GOT.out.bin", help="outputs to check, same layout")
    ap.add_argument("--json", required=True, metavar="NAME.json",
                    help="description from export-models.py (output names and shapes)")
    ap.add_argument("--rtol", type=float, default=1e-3,
                    help="tolerance relative to max|ref| of each output (default 1e-3)")
    ap.add_argument("--atol", type=float, default=1e-5,
                    help="absolute tolerance added to it (default 1e-5)")
    args = ap.parse_args(argv)
    try:
        with open(args.json) as f:
            outputs = json.load(f)["outputs"]
        for o in outputs:
            if o.get("dtype", "float32") != "float32":
                raise InputError("output %s has dtype %s; only float32 is supported"
                                  % (o["name"], o["dtype"]))
        refs = load(args.ref, outputs, "REF")
        gots = load(args.got, outputs, "GOT")
    except (OSError, ValueError, KeyError, InputError) as e:
        print("compare-outputs: %s" % e, file=sys.stderr)
        return 2
    ok = True
    for o, ref, got in zip(outputs, refs, gots):
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        ref_max = float(np.abs(ref64).max()) if ref.size else 0.0
        finite = bool(np.isfinite(got64).all())
        diff = np.abs(got64 - ref64)
        err = float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0
        if not finite:
            err = float("inf")
        rel = err / ref_max if ref_max > 0 else (0.0 if err == 0 else float("inf"))
        tol = args.atol + args.rtol * ref_max
        passed = finite and err <= tol
        ok = ok and passed
        worst = ""
        if diff.size and finite:
            idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
            worst = " at %s (ref %.6g got %.6g)" % (list(map(int, idx)), ref[idx], got[idx])
        print("%s %s: max_abs_err %.3g, rel_to_max %.3g, max|ref| %.4g, tol %.3g%s%s: %s" % (
            o["name"], list(o["shape"]), err, rel, ref_max, tol, worst,
            "" if finite else ", NON-FINITE values", "ok" if passed else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
