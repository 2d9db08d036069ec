#!/usr/bin/env python3
# PyTorch (eager, float32, CPU) speed anchor for one bench/suite.tsv row or a whole
# network (BERT-base encoder, ResNet-50); prints the median seconds per call on stdout.
# Protocol: one warm-up call, then 7 repeats of >= 50 ms of calls each; median of per-call times.
import argparse
import os
import statistics
import sys
import time

import torch_env


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch eager speed anchor")
    ap.add_argument("--suite", help="suite TSV file")
    ap.add_argument("--id", help="suite row id")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--network", choices=["bert", "resnet50"])
    args = ap.parse_args(argv)
    args.threads = max(1, args.threads)
    if not args.network and (not args.suite or not args.id):
        ap.error("need --suite FILE --id ID, or --network NAME")
    return args


def read_suite_row(path, want_id):
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) >= 3 and cols[0] == want_id:
                return cols[1], cols[2]
    raise SystemExit("torch_anchor: id %r not found in %s" % (want_id, path))


def prepare_process(args):
    """torch_env's setup; must run before torch is imported."""
    if args.network:
        blas_bound = args.network == "bert"
    else:
        blas_bound = read_suite_row(args.suite, args.id)[0] in ("dense", "batch_matmul", "matmul")
    torch_env.prepare_process(args.threads, blas_bound)


if __name__ == "__main__":
    ARGS = parse_args()
    prepare_process(ARGS)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPEATS = 7
MIN_REPEAT_S = 0.05


def time_fn(fn):
    """Warm-up once, then REPEATS timed windows of >= MIN_REPEAT_S; median s/call."""
    fn()
    per_call = []
    for _ in range(REPEATS):
        n = 0
        t0 = time.perf_counter()
        while True:
            fn()
            n += 1
            el = time.perf_counter() - t0
            if el >= MIN_REPEAT_S:
                break
        per_call.append(el / n)
    return statistics.median(per_call)


def parse_params(text):
    p = {"bias": 0, "act": "none", "stride": 1, "pad": 0}
    for tok in text.split():
        k, sep, v = tok.partition("=")
        if not sep:
            raise SystemExit("torch_anchor: bad parameter %r" % tok)
        p[k] = v if k == "act" else int(v)
    return p


def rnd(*shape):
    return torch.rand(*shape) * 2.0 - 1.0


def apply_act(y, act):
    if act == "relu":
        return F.relu(y)
    if act == "gelu":
        return F.gelu(y)  # exact (erf) GELU, like oneDNN gelu_erf
    if act == "none":
        return y
    raise SystemExit("torch_anchor: unknown act %r" % act)


def build_op(op, p):
    """Returns a zero-argument callable computing the suite op on fixed tensors."""
    if op == "dense":
        x, w = rnd(p["M"], p["K"]), rnd(p["N"], p["K"])
        b = rnd(p["N"]) if p["bias"] else None
        return lambda: apply_act(F.linear(x, w, b), p["act"])
    if op == "batch_matmul":
        a, b = rnd(p["B"], p["M"], p["K"]), rnd(p["B"], p["N"], p["K"])
        return lambda: torch.bmm(a, b.transpose(1, 2))
    if op == "matmul":
        a, b = rnd(p["M"], p["K"]), rnd(p["K"], p["N"])
        return lambda: torch.mm(a, b)
    if op in ("conv2d", "dwconv2d"):
        c = p["C"]
        x = rnd(1, c, p["H"], p["W"])
        if op == "conv2d":
            w, groups, kout = rnd(p["K"], c, p["R"], p["S"]), 1, p["K"]
        else:
            w, groups, kout = rnd(c, 1, p["R"], p["S"]), c, c
        b = rnd(kout) if p["bias"] else None
        return lambda: apply_act(
            F.conv2d(x, w, b, stride=p["stride"], padding=p["pad"], groups=groups), p["act"])
    if op == "softmax":
        x = rnd(p["B"], p["M"], p["N"])
        return lambda: torch.softmax(x, dim=-1)
    if op == "layernorm":
        x, g, b = rnd(p["M"], p["N"]), rnd(p["N"]), rnd(p["N"])
        return lambda: F.layer_norm(x, (p["N"],), g, b, eps=1e-5)
    raise SystemExit("torch_anchor: unknown op %r" % op)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        width = planes
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + idt)


class ResNet50(nn.Module):
    """Same topology as torchvision.models.resnet50 (v1.5: stride on the 3x3)."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
            nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        self.layer1 = self._layer(64, 3, 1)
        self.layer2 = self._layer(128, 4, 2)
        self.layer3 = self._layer(256, 6, 2)
        self.layer4 = self._layer(512, 3, 2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2048, num_classes)

    def _layer(self, planes, blocks, stride):
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


def build_network(name):
    if name == "bert":
        model = nn.Sequential(*[
            nn.TransformerEncoderLayer(768, 12, 3072, activation="gelu",
                                       batch_first=True, norm_first=False)
            for _ in range(12)])
        x = rnd(1, 128, 768)
    elif name == "resnet50":
        try:
            import torchvision  # noqa: F401  (optional; not installed here)
            model = torchvision.models.resnet50(weights=None)
        except ImportError:
            model = ResNet50()
        x = rnd(1, 3, 224, 224)
    else:
        raise SystemExit("torch_anchor: unknown network %r" % name)
    model.eval()
    return lambda: model(x)


def main(args):
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    with torch.no_grad():
        if args.network:
            fn = build_network(args.network)
        else:
            op, params = read_suite_row(args.suite, args.id)
            fn = build_op(op, parse_params(params))
        secs = time_fn(fn)
    print("%.9g" % secs)
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
