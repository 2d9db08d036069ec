"""cwm: tune tensor workloads from Python, through libcwm's embedding API (include/cwm/api.h).

    import cwm
    with cwm.Tuner("dense_qkv", log="tune.jsonl") as t:
        t.tune(64)
        print(t.best_seconds * 1e6, "us", t.best_steps[:2])
        t.export("out")                      # out/dense_qkv.c, .h, _example.c

The library is opened with cffi in ABI mode (no compiler needed), found at $CWM_LIBRARY, else
beside this package as installed (<prefix>/share/cwm/python/cwm -> <prefix>/lib/libcwm.so), else
in the source tree's build/ directory, else wherever the dynamic loader finds libcwm.so. Options
left None take what `cwm tune` would: $CWM_MODEL, $CWM_SUITE, $CWM_CACHE_DIR (else
~/.cache/cwm), $CC, and the library's defaults for the rest.
"""
import json
import os
import re
import signal
import threading

__all__ = ["Error", "Tuner", "version", "library_path"]

# The declarations of include/cwm/api.h, comments and preprocessor lines left out; tests/python
# checks that the two say the same.
_CDEF = """
typedef struct cwm_api_tuner cwm_api_tuner;
typedef struct cwm_api_options {
  size_t size;
  const char *model;
  const char *model_file;
  const char *pretrained;
  const char *suite;
  const char *log;
  const char *cache_dir;
  const char *cc;
  int threads;
  int per_round;
  int population;
  int generations;
  int repeats;
  double min_repeat_ms;
  int confirm;
  double family_quota;
  unsigned long long seed;
  int world_handoff;
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
  const char *target;
} cwm_api_options;
const char *cwm_api_version(void);
size_t cwm_api_options_size(void);
void cwm_api_options_init(cwm_api_options *o, size_t size);
int cwm_api_open(const char *workload, const cwm_api_options *o, cwm_api_tuner **out, char *err, size_t errlen);
int cwm_api_tune(cwm_api_tuner *h, int trials);
void cwm_api_stop(cwm_api_tuner *h);
double cwm_api_best_seconds(const cwm_api_tuner *h);
const char *cwm_api_best_steps(cwm_api_tuner *h);
void cwm_api_counts(const cwm_api_tuner *h, int *measured, int *resumed, int *errors);
int cwm_api_export(cwm_api_tuner *h, const char *dir, const char *name);
const char *cwm_api_workload_name(const cwm_api_tuner *h);
double cwm_api_flops(const cwm_api_tuner *h);
const char *cwm_api_model_file(const cwm_api_tuner *h);
const char *cwm_api_errmsg(const cwm_api_tuner *h);
void cwm_api_close(cwm_api_tuner *h);
"""


class Error(Exception):
    """A failed cwm call: str(e) is the library's message, e.code its cwm_status (the cwm
    command's exit codes: 2 bad argument, 3 malformed workload, 5 file I/O, 6 compiler, 8 nothing
    scheduled or measured, 9 model file, 10 runtime library missing ...)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


_ffi = None
_lib = None
_lib_path = None
_lock = threading.Lock()


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("CWM_LIBRARY")
    if env:
        return [env]  # chosen: nothing else is tried
    paths = []
    try:  # installed: _install.py says where the library directory is from here
        from . import _install
        paths.append(os.path.normpath(os.path.join(here, _install.LIBDIR, "libcwm.so")))
    except ImportError:
        pass
    paths.append(os.path.normpath(os.path.join(here, "..", "..", "build", "libcwm.so")))  # the source tree
    import ctypes.util
    found = ctypes.util.find_library("cwm")
    if found:
        paths.append(found)
    return paths


def _load():
    global _ffi, _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _ffi, _lib
        try:
            import cffi
        except ImportError as e:
            raise Error("cwm needs cffi (Debian: apt-get install python3-cffi; else pip install cffi)") from e
        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        tried = []
        for path in _candidates():
            # a bare name (find_library's) is the loader's to find; a path must exist
            if os.sep in path and not os.path.exists(path):
                tried.append(path)
                continue
            try:
                lib = ffi.dlopen(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            # a struct declared here unlike the library's would pass garbage: refuse it
            if lib.cwm_api_options_size() != ffi.sizeof("cwm_api_options"):
                raise Error("%s: its cwm_api_options has %d bytes, these bindings' %d: use the bindings "
                            "installed with it" % (path, lib.cwm_api_options_size(), ffi.sizeof("cwm_api_options")))
            _ffi, _lib, _lib_path = ffi, lib, path
            return ffi, lib
        raise Error("libcwm.so not found (set CWM_LIBRARY to its path); tried: " + ", ".join(tried or ["nothing"]))


def library_path():
    """The libcwm.so these bindings use (opened on first use)."""
    _load()
    return _lib_path


def version():
    """The library's version, e.g. "0.2.0"."""
    ffi, lib = _load()
    return ffi.string(lib.cwm_api_version()).decode()


def _str(ffi, keep, s):
    if s is None:
        return ffi.NULL
    b = os.fsencode(s)
    if b"\0" in b:
        raise Error("a string option holds a NUL byte: %r" % (s,), 2)
    c = ffi.new("char[]", b)
    keep.append(c)  # alive until the call that copies it returns
    return c


def _env(name):
    v = os.environ.get(name)
    return v if v else None


def _default_cache_dir():
    v = _env("CWM_CACHE_DIR")
    if v:
        return v
    home = _env("HOME")
    return os.path.join(home, ".cache", "cwm") if home else None


_INT_OPTIONS = ("threads", "per_round", "population", "generations", "repeats", "confirm", "world_handoff")
_FLOAT_OPTIONS = ("min_repeat_ms", "family_quota")


class Tuner:
    """A workload being tuned: Tuner(workload, trials=64, model="world", log=None, ...).

    workload: a suite id ("dense_qkv"), an op spec ("dense M=128 N=768 K=768 bias=1 act=none") or
    "@FILE" with workload text. trials: what tune() measures when given no count. model: "world"
    (the shipped compiler world model, or model_file), "ansor" (optionally pretrained=FILE) or
    "random". log: the tuning log, resumed and appended. The other keywords are the fields of
    cwm_api_options (threads, per_round, population, generations, repeats, min_repeat_ms, confirm,
    family_quota, seed, world_handoff, suite, cache_dir, cc, target: "native", "avx2" ... as
    `cwm --target`); progress: a callable given each
    progress line. Raises Error when the workload, an option or the model is bad.
    """

    def __init__(self, workload, trials=64, model="world", log=None, threads=None, seed=1, model_file=None,
                 pretrained=None, suite=None, cache_dir=None, cc=None, target=None, progress=None,
                 **options):
        ffi, lib = _load()
        self._h = None
        unknown = set(options) - set(_INT_OPTIONS) - set(_FLOAT_OPTIONS)
        if unknown:
            raise TypeError("unknown option(s): " + ", ".join(sorted(unknown)))
        if not isinstance(workload, str) or not workload:
            raise Error("the workload must be a non-empty string, not %r" % (workload,), 2)
        if not isinstance(trials, int) or trials < 0:
            raise Error("trials must be an int >= 0, not %r" % (trials,), 2)
        self.trials = trials
        keep = []
        o = ffi.new("cwm_api_options *")
        lib.cwm_api_options_init(o, ffi.sizeof("cwm_api_options"))
        o.model = _str(ffi, keep, model)
        o.model_file = _str(ffi, keep, model_file or _env("CWM_MODEL"))
        o.pretrained = _str(ffi, keep, pretrained)
        o.suite = _str(ffi, keep, suite or _env("CWM_SUITE"))
        o.log = _str(ffi, keep, log)
        o.cache_dir = _str(ffi, keep, cache_dir or _default_cache_dir())
        o.cc = _str(ffi, keep, cc or _env("CC"))
        o.target = _str(ffi, keep, target)
        if threads is not None:
            options["threads"] = threads
        for k, v in options.items():
            if v is None:
                continue
            try:
                setattr(o, k, int(v) if k in _INT_OPTIONS else float(v))
            except (OverflowError, TypeError, ValueError) as e:
                raise Error("%s: %s" % (k, e), 2) from None
        if seed is not None:
            try:
                o.seed = seed
            except (OverflowError, TypeError) as e:
                raise Error("seed: %s" % e, 2) from None
        self._progress = None
        if progress is not None:
            # kept with the tuner: the library calls it for as long as the handle lives
            self._progress = ffi.callback("void(void *, const char *)",
                                          lambda ud, line: progress(ffi.string(line).decode(errors="replace")))
            o.progress = self._progress
        out = ffi.new("cwm_api_tuner **")
        err = ffi.new("char[]", 1024)
        rc = lib.cwm_api_open(_str(ffi, keep, workload), o, out, err, 1024)
        if rc:
            raise Error(ffi.string(err).decode(errors="replace"), rc)
        self._h = out[0]

    def _handle(self):
        if self._h is None:
            raise Error("the tuner is closed", 2)
        return self._h

    def _check(self, rc):
        if rc:
            raise Error(_ffi.string(_lib.cwm_api_errmsg(self._h)).decode(errors="replace"), rc)

    def tune(self, trials=None):
        """Measures up to `trials` (default: the constructor's) new programs; calls add up. Ctrl-C
        returns after the measurements in flight (nothing measured is lost) and raises
        KeyboardInterrupt. Returns self."""
        h = self._handle()
        n = self.trials if trials is None else trials
        if not isinstance(n, int) or n < 0 or n > 2**31 - 1:
            raise Error("trials must be an int >= 0, not %r" % (n,), 2)
        # The call runs in a thread so that Ctrl-C reaches this one, which asks it to stop. That
        # thread blocks SIGINT, so the signal is delivered here and wakes the join below (Python
        # runs its handlers in the main thread, and only when that thread wakes).
        res = []

        def run():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            res.append(_lib.cwm_api_tune(h, n))

        th = threading.Thread(target=run, name="cwm-tune")
        th.start()
        try:
            th.join()
        except KeyboardInterrupt:
            _lib.cwm_api_stop(h)
            th.join()
            raise
        self._check(res[0] if res else 70)
        return self

    def stop(self):
        """Asks a tune() running in another thread to return after the measurements in flight."""
        if self._h is not None:
            _lib.cwm_api_stop(self._h)

    @property
    def best_seconds(self):
        """The best program's time in seconds, or None while no program has run."""
        s = _lib.cwm_api_best_seconds(self._handle())
        return s if s >= 0 else None

    @property
    def best_steps(self):
        """The best program's schedule: a list of Ansor's steps (as the log holds them), or None."""
        p = _lib.cwm_api_best_steps(self._handle())
        return None if p == _ffi.NULL else json.loads(_ffi.string(p).decode())

    def _counts(self):
        c = _ffi.new("int[3]")
        _lib.cwm_api_counts(self._handle(), c, c + 1, c + 2)
        return c[0], c[1], c[2]

    @property
    def measured(self):
        """Programs measured by this tuner."""
        return self._counts()[0]

    @property
    def resumed(self):
        """Records of the workload taken from the log when it was opened."""
        return self._counts()[1]

    @property
    def errors(self):
        """Measured programs that failed (compile, crash, wrong answer, time-out)."""
        return self._counts()[2]

    @property
    def workload_name(self):
        return _ffi.string(_lib.cwm_api_workload_name(self._handle())).decode(errors="replace")

    @property
    def flops(self):
        """Floating-point operations of one run of the workload."""
        return _lib.cwm_api_flops(self._handle())

    @property
    def model_file(self):
        """The world model file in use, or None for the other models."""
        p = _lib.cwm_api_model_file(self._handle())
        return None if p == _ffi.NULL else os.fsdecode(_ffi.string(p))

    def export(self, directory, name=None):
        """Writes the best kernel as DIRECTORY/NAME.c, NAME.h and NAME_example.c (NAME: a C
        identifier; None: the workload's name with other characters as '_'); returns the paths."""
        h = self._handle()
        keep = []
        if not isinstance(directory, (str, bytes, os.PathLike)):
            raise Error("the export directory must be a path, not %r" % (directory,), 2)
        directory = os.fspath(directory)
        if name is not None and not isinstance(name, str):
            raise Error("the export name must be a string, not %r" % (name,), 2)
        self._check(_lib.cwm_api_export(h, _str(_ffi, keep, directory), _str(_ffi, keep, name)))
        if name is None:
            name = re.sub(r"[^A-Za-z0-9_]", "_", self.workload_name)
        return [os.path.join(os.fsdecode(directory), name + s) for s in (".c", ".h", "_example.c")]

    def close(self):
        """Frees the tuner and closes its log; closing again does nothing."""
        h, self._h = self._h, None
        if h is not None:
            _lib.cwm_api_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None and _lib is not None:
            self.close()

    def __repr__(self):
        if self._h is None:
            return "<cwm.Tuner closed>"
        b = self.best_seconds
        return "<cwm.Tuner %s: %d measured, best %s>" % (self.workload_name, self.measured,
                                                          "%.2f us" % (b * 1e6) if b is not None else "none")
