"""Process setup for timing PyTorch on this machine, shared by torch_anchor.py and torch_e2e.py.
It must run before torch is imported, so this module imports nothing of torch."""
import os
import sys


def prepare_process(threads, blas_bound):
    """Environment for the torch libraries at `threads` threads; blas_bound: the work is
    mostly OpenBLAS's (matrix products), which changes how OpenMP threads should wait."""
    # glibc hands freed multi-MB blocks back to the OS (heap trim, per-call mmap), so in
    # some processes (not others) eager PyTorch page-faults fresh output/scratch buffers
    # on every call: up to 10x on dwconv_mbv2, bimodal from run to run. Keep freed memory
    # in the heap, as a tuned deployment (or jemalloc/tcmalloc) would: re-exec once with
    # glibc's knobs set. A preset CWM_TORCH_ANCHOR_MALLOC (e.g. =0) leaves malloc alone.
    if "CWM_TORCH_ANCHOR_MALLOC" not in os.environ:
        env = dict(os.environ, CWM_TORCH_ANCHOR_MALLOC="1",
                   MALLOC_TRIM_THRESHOLD_=str(1 << 34), MALLOC_MMAP_THRESHOLD_=str(1 << 25))
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    t = str(threads)
    # Debian's torch runs mm/bmm/linear on OpenBLAS (pthread build), whose pool ignores
    # torch.set_num_threads: pin it (and OpenMP) before the libraries load.
    os.environ["OPENBLAS_NUM_THREADS"] = t
    os.environ["OMP_NUM_THREADS"] = t
    # With > 1 thread, libgomp workers spinning after torch's own parallel loops (bias
    # copy, gelu) steal the cores from OpenBLAS's threads: 2-threaded linear/bmm ran 2-70x
    # slower than 1-threaded. Passive waiting fixes BLAS-bound work but slows OpenMP-bound
    # ops (layernorm 4x), so it is set only where OpenBLAS does the work.
    if threads > 1 and blas_bound and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
