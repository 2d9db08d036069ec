# cpu.awk: the CPU a bench's figures belong to, from /proc/cpuinfo: its name, family and model
# numbers and widest vector extension ("AMD EPYC" alone names several kinds of core).
# usage: awk -f bench/lib/cpu.awk /proc/cpuinfo
BEGIN { FS = "\t*: " }
$1 == "model name" && m == "" { m = $2 }
$1 == "cpu family" && f == "" { f = $2 }
$1 == "model" && d == "" { d = $2 }
$1 == "flags" && i == "" { i = $2 ~ / avx512f / ? "AVX-512" : $2 ~ / avx2 / ? "AVX2" : "no AVX2" }
END { printf "%s", m; if (f != "") printf " (family %s model %s, %s)", f, d, i }
