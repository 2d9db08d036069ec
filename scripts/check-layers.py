#!/usr/bin/env python3
"""check-layers.py: the include rules of the layout in docs/architecture.md.

Every folder of src/ is a layer, and every public header of include/cwm/ belongs to the layer
that implements it. An include may point to the same layer or a lower one, never upward. Inside
one folder, no two files may depend on each other both ways: a .c file depends on another when
it calls a function the other defines, and a cycle of such dependencies (strongly connected
files) is reported.

Usage: scripts/check-layers.py [--list]   (exit 1 on a finding; --list prints the header map)
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Lowest first; an include must not point to a later entry.
LAYERS = ["util", "te", "graph", "state", "codegen", "record", "measure", "dist", "costmodel", "world",
          "search", "train", "netc", "api", "cli"]

# Public headers and the layer that implements them.
HEADERS = {
    "util.h": "util",
    "te.h": "te",
    "graph.h": "graph", "partition.h": "graph",
    "state.h": "state",
    "codegen.h": "codegen",
    "record.h": "record", "dataset.h": "record",
    "measure.h": "measure",
    "farm.h": "dist",
    "costmodel.h": "costmodel", "xgb.h": "costmodel",
    "nn.h": "world", "tokenizer.h": "world", "world.h": "world", "ranker.h": "world",
    "modelfile.h": "world", "metrics.h": "world",
    "sketch.h": "search", "search.h": "search", "scheduler.h": "search",
    "train.h": "train",
    "netc.h": "netc",
    "cwm.h": "api", "api.h": "api",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def layer_of_include(path, src_layer):
    """The layer an include names, or None for a system header or a file outside the tree."""
    if path.startswith("cwm/"):
        name = path[4:]
        if name not in HEADERS:
            return "?" + name
        return HEADERS[name]
    if path.startswith("../"):
        part = path[3:].split("/")[0]
        return part if part in LAYERS else None
    if "/" not in path and src_layer is not None:
        return src_layer  # a private header of the same folder
    return None


def files():
    for base in ("src", "include/cwm"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, base)):
            if "runtime" in dirpath.split(os.sep):
                continue  # code embedded into generated libraries, not part of the layers
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    yield os.path.join(dirpath, n)


def layer_of_file(path):
    rel = os.path.relpath(path, ROOT)
    if rel.startswith("include/cwm/"):
        return HEADERS.get(os.path.basename(rel), "?" + os.path.basename(rel))
    parts = rel.split(os.sep)
    return parts[1] if len(parts) > 2 else None


def check_includes():
    bad = []
    for f in files():
        lay = layer_of_file(f)
        if lay is None or lay.startswith("?"):
            bad.append("%s: no layer (add the header to HEADERS in scripts/check-layers.py)" %
                       os.path.relpath(f, ROOT))
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                to = layer_of_include(m.group(1), lay)
                if to is None:
                    continue
                if to.startswith("?"):
                    bad.append("%s:%d: includes %s, a header of no layer" %
                               (os.path.relpath(f, ROOT), no, m.group(1)))
                elif LAYERS.index(to) > LAYERS.index(lay):
                    bad.append("%s:%d: %s (layer %s) includes %s (layer %s, above it)" %
                               (os.path.relpath(f, ROOT), no, os.path.relpath(f, ROOT), lay,
                                m.group(1), to))
    return bad


COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'')
DEFINE = re.compile(r"^(?!static\b)(?![ \t#])[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{",
                    re.M | re.S)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def strip(text):
    return STRING.sub('""', COMMENT.sub(" ", text))


def check_cycles():
    bad = []
    folders = {}
    for f in files():
        if f.endswith(".c") and "/src/" in f:
            folders.setdefault(os.path.dirname(f), []).append(f)
    for folder, fs in sorted(folders.items()):
        text = {f: strip(open(f, encoding="utf-8", errors="replace").read()) for f in fs}
        defined = {}
        for f in fs:
            for m in DEFINE.finditer(text[f]):
                defined.setdefault(m.group(1), f)
        deps = {f: set() for f in fs}
        for f in fs:
            for m in CALL.finditer(text[f]):
                g = defined.get(m.group(1))
                if g and g != f:
                    deps[f].add(g)
        for comp in scc(fs, deps):
            if len(comp) > 1:
                bad.append("files that depend on each other (a cycle): " +
                           ", ".join(sorted(os.path.relpath(c, ROOT) for c in comp)))
    return bad


def scc(nodes, edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    if "--list" in sys.argv[1:]:
        for h, l in sorted(HEADERS.items(), key=lambda x: (LAYERS.index(x[1]), x[0])):
            print("%-10s %s" % (l, h))
        return 0
    bad = check_includes() + check_cycles()
    for b in bad:
        print(b)
    if bad:
        print("check-layers: %d finding(s); the layers, lowest first: %s" % (len(bad), " < ".join(LAYERS)))
        return 1
    print("check-layers: no upward include, no cycle between files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
