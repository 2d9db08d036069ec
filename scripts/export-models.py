#!/usr/bin/env python3
"""Exports test/benchmark networks to ONNX with seeded random weights and reference data.

For each MODEL it writes, into --out:
  NAME.onnx      opset 13, fixed shapes (no dynamic axes), constant folding on
  NAME.in.bin    the reference inputs: each graph input's raw little-endian data,
                 concatenated in graph-input order (float32 images, int64 token ids)
  NAME.out.bin   PyTorch's outputs for those inputs, float32, in graph-output order
  NAME.json      inputs/outputs (name, dtype, shape), seed, torch version, max |output|

Models: resnet50, bert_base, tiny_cnn, tiny_bert, mobilenet_v2 (see MODELS below).
Weights and inputs depend only on (MODEL, --seed), not on the order of MODEL arguments.
The default export follows the spec above; --no-fold, --keep-bn and --dynamic write
variants (use --suffix) that keep more of the raw patterns for importer tests.
Run with /usr/bin/python3 here (it has torch, torchvision, onnx).

The builders are importable (bench/torch_e2e.py loads this file with importlib):
  build(name, seed) -> Spec(model, inputs, input_names, output_names, ...)
"""
import argparse
import collections
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 13

Spec = collections.namedtuple("Spec", "name model inputs input_names output_names")


# ---------------------------------------------------------------------------------------
# BERT encoder (HuggingFace BertModel layout, no mask, no pooler, dropout 0)

class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        assert hidden % heads == 0
        self.num_attention_heads = heads
        self.attention_head_size = hidden // heads
        self.all_head_size = hidden
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def transpose_for_scores(self, x):
        # As in transformers' BertSelfAttention: the .size() calls export as
        # Shape/Gather/Concat chains feeding Reshape.
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.attention_head_size)
        probs = F.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v)
        ctx = ctx.permute(0, 2, 1, 3).contiguous()
        new_ctx_shape = ctx.size()[:-2] + (self.all_head_size,)
        return ctx.view(new_ctx_shape)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, ffn, eps):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        a = self.attn_out(self.attention(x))
        x = self.attn_norm(a + x)
        h = F.gelu(self.intermediate(x))  # exact (erf) GELU
        return self.out_norm(self.output(h) + x)


class BertEncoder(nn.Module):
    """BERT-base by default; every size is an argument (tiny_bert uses small ones)."""

    def __init__(self, vocab=30522, hidden=768, heads=12, ffn=3072, layers=12,
                 seq=128, max_positions=512, eps=1e-12):
        super().__init__()
        self.seq = seq
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Parameter(torch.zeros(max_positions, hidden))
        self.token_type_embedding = nn.Parameter(torch.zeros(hidden))  # type-0 row
        self.emb_norm = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn, eps) for _ in range(layers))
        self._init_weights()

    def _init_weights(self):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    # BERT zeroes biases; small noise instead, so that a misplaced bias
                    # add shows up (and all-zero biases are not deduplicated by the
                    # exporter into one initializer plus Identity nodes).
                    nn.init.normal_(m.bias, mean=0.0, std=0.02)
            elif isinstance(m, nn.LayerNorm):
                # BERT's init is weight 1, bias 0; perturb so the test is not symmetric.
                with torch.no_grad():
                    m.weight.copy_(1.0 + 0.1 * torch.randn_like(m.weight))
                    m.bias.copy_(0.05 * torch.randn_like(m.bias))
        nn.init.normal_(self.position_embeddings, mean=0.0, std=0.02)
        nn.init.normal_(self.token_type_embedding, mean=0.0, std=0.02)

    def forward(self, input_ids):
        # With fixed shapes the size is a constant: the Slice of the constant table is
        # folded into an initializer (with --dynamic it stays Shape/Gather/Slice).
        pos = self.position_embeddings[: input_ids.size(1)]
        x = self.word_embeddings(input_ids) + pos + self.token_type_embedding
        x = self.emb_norm(x)
        for layer in self.layers:
            x = layer(x)
        return x


# ---------------------------------------------------------------------------------------
# tiny_cnn: small ResNet-style CNN with non-trivial BatchNorm statistics

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.shortcut is None else self.shortcut(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + idt)


class TinyCNN(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False),
                                  nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.block1 = BasicBlock(16, 16, 1)
        self.block2 = BasicBlock(16, 32, 2)
        self.dw = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False),
                                nn.BatchNorm2d(32), nn.ReLU())
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)
        randomize_batchnorm(self)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = self.block2(self.block1(x))
        x = self.gap(self.dw(x))
        return self.fc(torch.flatten(x, 1))


def randomize_batchnorm(model):
    """Random non-trivial running stats and affine parameters (eval-mode BN)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(0.2 * torch.randn(n))
                m.running_var.copy_(0.5 + torch.rand(n))
                m.weight.copy_(0.5 + torch.rand(n))
                m.bias.copy_(0.2 * torch.randn(n))


# ---------------------------------------------------------------------------------------

def _image(gen, shape):
    return [torch.randn(*shape, generator=gen)]


def _token_ids(gen, vocab, seq):
    return [torch.randint(0, vocab, (1, seq), generator=gen, dtype=torch.int64)]


def _torchvision(fn_name):
    import torchvision
    return getattr(torchvision.models, fn_name)(weights=None)


def calibrate_batchnorm(model, shape, batches=2, batch=8):
    """Sets BN running stats to the statistics of random-image activations (as a real
    network's are), instead of the init's (0, 1). Without it, eval-mode mobilenet_v2
    with fresh weights shrinks the signal layer by layer: outputs ~1e-9, which any
    absolute tolerance would accept."""
    gen = torch.Generator().manual_seed(12345)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch, *shape[1:], generator=gen))
    for m in bns:
        m.momentum = 0.1
    return model.eval()


BERT_TINY = dict(vocab=100, hidden=64, heads=4, ffn=128, layers=2, seq=16, max_positions=32)

# name -> (description, builder(), inputs(generator), input names, output names)
MODELS = collections.OrderedDict([
    ("resnet50", ("torchvision resnet50, [1,3,224,224] -> [1,1000]",
                  lambda: _torchvision("resnet50"),
                  lambda g: _image(g, (1, 3, 224, 224)), ["input"], ["output"])),
    ("bert_base", ("BERT-base encoder, int64 ids [1,128] -> [1,128,768]",
                   lambda: BertEncoder(),
                   lambda g: _token_ids(g, 30522, 128), ["input_ids"], ["last_hidden_state"])),
    ("tiny_cnn", ("small ResNet-style CNN with BN/depthwise, [1,3,32,32] -> [1,10]",
                  lambda: TinyCNN(),
                  lambda g: _image(g, (1, 3, 32, 32)), ["input"], ["output"])),
    ("tiny_bert", ("BERT encoder vocab 100, hidden 64, 4 heads, ffn 128, 2 layers, seq 16",
                   lambda: BertEncoder(**BERT_TINY),
                   lambda g: _token_ids(g, BERT_TINY["vocab"], BERT_TINY["seq"]),
                   ["input_ids"], ["last_hidden_state"])),
    ("mobilenet_v2", ("torchvision mobilenet_v2, BN stats calibrated on random images, "
                      "[1,3,224,224] -> [1,1000] (extra)",
                      lambda: calibrate_batchnorm(_torchvision("mobilenet_v2"),
                                                  (1, 3, 224, 224)),
                      lambda g: _image(g, (1, 3, 224, 224)), ["input"], ["output"])),
])


def build(name, seed=0):
    """The eval-mode model (weights from torch.manual_seed(seed)) and its reference inputs."""
    if name not in MODELS:
        raise KeyError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
    _, make_model, make_inputs, in_names, out_names = MODELS[name]
    torch.manual_seed(seed)
    model = make_model().eval()
    gen = torch.Generator().manual_seed(seed + 1)
    inputs = make_inputs(gen)
    return Spec(name, model, inputs, list(in_names), list(out_names))


def _desc(name, t):
    return {"name": name, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}


def _dynamic_axes(spec):
    """--dynamic: batch (dim 0) symbolic everywhere, and the sequence (dim 1) for BERT."""
    dims = {0: "batch", 1: "seq"} if spec.input_names == ["input_ids"] else {0: "batch"}
    return {n: dict(dims) for n in spec.input_names + spec.output_names}


def export(name, out_dir, seed, suffix="", fold=True, keep_bn=False, dynamic=False):
    spec = build(name, seed)
    with torch.no_grad():
        outs = spec.model(*spec.inputs)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    stem = name + suffix
    base = os.path.join(out_dir, stem)
    # In EVAL mode (the default) the exporter folds every BatchNorm into the preceding
    # Conv; PRESERVE (model still in eval()) keeps BatchNormalization nodes.
    training = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(spec.model, tuple(spec.inputs), base + ".onnx", opset_version=OPSET,
                      do_constant_folding=fold, training=training,
                      input_names=spec.input_names, output_names=spec.output_names,
                      dynamic_axes=_dynamic_axes(spec) if dynamic else None)
    with open(base + ".in.bin", "wb") as f:
        for t in spec.inputs:
            a = t.numpy()
            assert a.dtype in (np.float32, np.int64), a.dtype
            a.astype(a.dtype.newbyteorder("<"), copy=False).tofile(f)
    with open(base + ".out.bin", "wb") as f:
        for t in outs:
            t.numpy().astype("<f4", copy=False).tofile(f)
    info = collections.OrderedDict([
        ("model", name),
        ("description", MODELS[name][0]),
        ("onnx", stem + ".onnx"),
        ("opset", OPSET),
        ("seed", seed),
        ("torch_version", torch.__version__),
        ("export", {"constant_folding": fold, "keep_bn": keep_bn, "dynamic_axes": dynamic}),
        ("inputs", [_desc(n, t) for n, t in zip(spec.input_names, spec.inputs)]),
        ("outputs", [_desc(n, t) for n, t in zip(spec.output_names, outs)]),
        ("max_abs_output", max(float(t.abs().max()) for t in outs)),
    ])
    with open(base + ".json", "w") as f:
        f.write("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v))
                                    for k, v in info.items()) + "\n}\n")
    return base


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Export networks to ONNX (opset %d, fixed shapes) with seeded random "
                    "weights, plus reference inputs/outputs (NAME.in.bin, NAME.out.bin) "
                    "and a description (NAME.json)." % OPSET,
        epilog="models: " + "; ".join("%s: %s" % (k, v[0]) for k, v in MODELS.items()))
    ap.add_argument("--out", default=".", help="output directory (default: .)")
    ap.add_argument("--seed", type=int, default=0, help="weight/input seed (default: 0)")
    ap.add_argument("--suffix", default="",
                    help="appended to each file name (NAME+SUFFIX.onnx ...), for variants")
    ap.add_argument("--no-fold", action="store_true",
                    help="variant: do_constant_folding=False (Constant/Unsqueeze/Concat "
                         "shape chains and the position Slice stay in the graph)")
    ap.add_argument("--keep-bn", action="store_true",
                    help="variant: export with TrainingMode.PRESERVE (model in eval) so "
                         "BatchNormalization nodes survive instead of being folded into Conv")
    ap.add_argument("--dynamic", action="store_true",
                    help="variant: symbolic batch (and BERT sequence) dims; the .size() "
                         "calls then export as Shape/Gather/Unsqueeze/Concat chains")
    ap.add_argument("models", nargs="+", metavar="MODEL", choices=list(MODELS),
                    help="one of: " + ", ".join(MODELS))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        base = export(name, args.out, args.seed, args.suffix, fold=not args.no_fold,
                      keep_bn=args.keep_bn, dynamic=args.dynamic)
        print("%s: wrote %s.{onnx,in.bin,out.bin,json}" % (name, base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
