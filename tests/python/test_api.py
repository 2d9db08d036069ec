"""The Python bindings (python/cwm) over libcwm.so: declarations in step with include/cwm/api.h,
tuning and export, errors raised with the library's message, the handle's life, and the package
as installed finding the installed library and data beside itself.

Run by ctest python_api (CWM_LIBRARY: the build's libcwm.so; CWM_BUILD_DIR: the build, for the
install test), or by hand: CWM_LIBRARY=build/libcwm.so PYTHONPATH=python python3 -m pytest -q tests/python
"""
import math
import os
import re
import shutil
import subprocess
import sys

import pytest

import cwm

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TINY = "dense M=16 N=24 K=32 bias=1 act=relu"
# a small search and short timings: a smoke test of the bindings, not a tuning
QUICK = dict(per_round=4, population=32, generations=1, repeats=1, min_repeat_ms=1, confirm=2)


def _declarations(text):
    """C declarations with comments, preprocessor lines and extern "C" braces left out, one per
    entry, whitespace collapsed."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    text = re.sub(r'extern\s+"C"\s*\{', " ", text)
    body = []
    depth = 0
    cur = ""
    for ch in text:  # split at ';' outside braces
        cur += ch
        depth += ch == "{"
        depth -= ch == "}"
        if ch == ";" and depth == 0:
            body.append(" ".join(cur.split()))
            cur = ""
    return [d for d in body if d != ";"]


def test_cdef_matches_header():
    with open(os.path.join(SRC, "include", "cwm", "api.h")) as f:
        header = _declarations(f.read())
    assert header == _declarations(cwm._CDEF)


def test_version():
    with open(os.path.join(SRC, "include", "cwm", "util.h")) as f:
        want = re.search(r'#define CWM_VERSION "([^"]+)"', f.read()).group(1)
    assert cwm.version() == want
    assert os.path.exists(cwm.library_path())


def test_bad_workload_raises_naming_it():
    with pytest.raises(cwm.Error) as e:
        cwm.Tuner("no_such_workload_42", model="random")
    assert "no_such_workload_42" in str(e.value)
    assert e.value.code == 3
    with pytest.raises(cwm.Error) as e:
        cwm.Tuner("dense M=16 N=24", model="random")  # K missing
    assert "dense M=16 N=24" in str(e.value) and "K" in str(e.value)
    with pytest.raises(cwm.Error):
        cwm.Tuner("", model="random")


def test_bad_options_raise():
    with pytest.raises(cwm.Error, match="unknown model 'nosuch'"):
        cwm.Tuner(TINY, model="nosuch")
    with pytest.raises(cwm.Error, match="threads must be 1..1024"):
        cwm.Tuner(TINY, model="random", threads=0)
    with pytest.raises(cwm.Error, match="repeats"):
        cwm.Tuner(TINY, model="random", repeats=99)
    with pytest.raises(cwm.Error, match="no-such-model.cwm"):
        cwm.Tuner(TINY, model="world", model_file="/nonexistent/no-such-model.cwm")
    with pytest.raises(TypeError):
        cwm.Tuner(TINY, model="random", no_such_option=1)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The default (world) model on a tiny workload, 4 trials, with a log and progress lines."""
    d = tmp_path_factory.mktemp("tuned")
    lines = []
    t = cwm.Tuner(TINY, trials=4, log=str(d / "log.jsonl"), progress=lines.append, **QUICK)
    t.tune()
    yield t, d, lines
    t.close()


def test_tune(tuned):
    t, d, lines = tuned
    assert t.model_file and t.model_file.endswith(".cwm")
    s = t.best_seconds
    assert s is not None and s > 0 and math.isfinite(s)
    steps = t.best_steps
    assert isinstance(steps, list) and steps and all(isinstance(x, list) and isinstance(x[0], str) for x in steps)
    assert t.measured == 4 and t.resumed == 0 and 0 <= t.errors < 4
    assert t.flops > 0 and t.workload_name == "dense"
    with open(d / "log.jsonl") as f:
        assert len(f.read().splitlines()) == 4
    assert any(l.startswith("round 1: 4/4 trials") for l in lines)


def test_tune_adds_up_and_resumes(tuned, tmp_path):
    t, d, _ = tuned
    log = tmp_path / "log.jsonl"
    with cwm.Tuner(TINY, model="random", log=str(log), **QUICK) as a:
        a.tune(4).tune(4)
        assert a.measured == 8
        a.tune(0)
        assert a.measured == 8
        with pytest.raises(cwm.Error, match="trials must be"):
            a.tune(-1)
    with cwm.Tuner(TINY, model="random", log=str(log), **QUICK) as b:
        assert b.resumed == 8 and b.measured == 0 and b.best_seconds > 0


def _compile(path, tmp_path):
    cc = os.environ.get("CC") or "cc"
    r = subprocess.run([cc, "-c", "-O2", "-march=native", "-fopenmp", "-Wall", path, "-o",
                        str(tmp_path / (os.path.basename(path) + ".o"))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_export_compiles(tuned, tmp_path):
    t, _, _ = tuned
    paths = t.export(tmp_path / "out", "my_kernel")
    assert [os.path.basename(p) for p in paths] == ["my_kernel.c", "my_kernel.h", "my_kernel_example.c"]
    for p in paths:
        assert os.path.getsize(p) > 0
    with open(paths[1]) as f:
        assert "my_kernel" in f.read()
    _compile(paths[0], tmp_path)
    # no name: the workload's
    paths = t.export(str(tmp_path / "out2"))
    assert os.path.basename(paths[0]) == "dense.c" and os.path.exists(paths[0])
    _compile(paths[0], tmp_path)


@pytest.mark.parametrize("name", ["int", "1abc", "cwm_kernel", "has space", "memcpy", "a" * 61, "__x"])
def test_bad_export_name_raises(tuned, tmp_path, name):
    t, _, _ = tuned
    with pytest.raises(cwm.Error) as e:
        t.export(tmp_path, name)
    assert name in str(e.value) and e.value.code == 2
    assert not os.listdir(tmp_path)


def test_export_before_tuning_raises(tmp_path):
    with cwm.Tuner(TINY, model="random") as t:
        assert t.best_seconds is None and t.best_steps is None
        with pytest.raises(cwm.Error, match="tune first"):
            t.export(tmp_path, "k")


def test_close_twice_is_safe():
    t = cwm.Tuner(TINY, model="random")
    t.close()
    t.close()
    with pytest.raises(cwm.Error, match="closed"):
        t.tune(1)
    with pytest.raises(cwm.Error, match="closed"):
        t.best_seconds
    assert "closed" in repr(t)
    with cwm.Tuner(TINY, model="random") as u:
        pass
    u.close()


def test_installed_package_finds_installed_library(tmp_path):
    """cmake --install, then the package under <prefix>/share/cwm/python opens <prefix>'s library,
    and that library finds the installed model and suite beside itself (no environment help)."""
    build = os.environ.get("CWM_BUILD_DIR")
    if not build or not shutil.which("cmake"):
        pytest.skip("CWM_BUILD_DIR not set (ctest python_api sets it)")
    prefix = tmp_path / "p"
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items()
           if k not in ("CWM_LIBRARY", "CWM_MODEL", "CWM_SUITE", "CWM_SOURCE_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(prefix / "share" / "cwm" / "python")
    script = ("import cwm\n"
              "print(cwm.library_path())\n"
              "t = cwm.Tuner('layernorm')\n"
              "print(t.model_file)\n"
              "print(t.workload_name)\n")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lib, model, name = r.stdout.split("\n")[:3]
    assert os.path.realpath(lib).startswith(os.path.realpath(prefix)), lib
    assert os.path.realpath(model) == os.path.realpath(prefix / "share" / "cwm" / "default.cwm"), model
    assert name == "layernorm"


def test_target():
    """A target other than the host's: its flags in the log's records, its name in the export; an
    unknown target raises naming it. Opening with the default target again gives the host's."""
    with pytest.raises(cwm.Error, match="unknown target 'vax'") as e:
        cwm.Tuner(TINY, model="random", target="vax")
    assert e.value.code == 2


def test_target_generic(tmp_path):
    log = tmp_path / "log.jsonl"
    with cwm.Tuner(TINY, trials=2, model="random", target="generic", log=str(log), **QUICK) as t:
        t.tune()
        t.export(str(tmp_path / "out"), "k")
    text = log.read_text()
    assert "-isa=generic" in text and "march=native" not in text
    assert "-isa=generic" in (tmp_path / "out" / "k.h").read_text()
    log2 = tmp_path / "log2.jsonl"
    with cwm.Tuner(TINY, trials=1, model="random", log=str(log2), **QUICK) as t:
        t.tune()
    assert "-isa=generic" not in log2.read_text()
