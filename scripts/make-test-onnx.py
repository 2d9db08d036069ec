#!/usr/bin/env python3
# Regenerates tests/models/tiny_import.onnx, the real torch.onnx export that test_graph loads: a
# tiny conv-bn-relu-maxpool-flatten-linear network in eval mode, opset 13, fixed input shape. The
# flatten is x.view(x.size(0), -1), which torch writes as a Shape/Gather/Unsqueeze/Concat chain
# into Reshape, and the BatchNorm is kept (not fused by the exporter), so the importer folds both.
# Needs PyTorch (python3-torch) and onnx; the test itself does not.
#   /usr/bin/python3 scripts/make-test-onnx.py [OUT]
import os
import sys

import torch
import torch.nn as nn

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "models",
                                                         "tiny_import.onnx")
torch.manual_seed(0)


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


net = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    Flatten(), nn.Linear(8 * 4 * 4, 10))
# non-trivial running statistics, so that folding BatchNorm into the conv changes the weights
with torch.no_grad():
    bn = net[1]
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.uniform_(0.5, 1.5)
    bn.bias.uniform_(-0.2, 0.2)
net.eval()
x = torch.randn(1, 3, 8, 8)
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
# PRESERVE (the model is in eval mode) without constant folding keeps the BatchNormalization node
# and the shape chain for the importer to fold
torch.onnx.export(net, x, out, opset_version=13, input_names=["x"], output_names=["y"],
                  do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
with torch.no_grad():
    print("y[0, :3] =", net(x)[0, :3].tolist())
print(out, os.path.getsize(out), "bytes")
