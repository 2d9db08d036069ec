# paired.awk: bench/ablation.sh's statistics. Input: runs.tsv (row, arm, policy, seed, tuned_us,
# retimed_us; a header line; retimed "-" when a run has no re-timing). Each run of an arm other
# than world is paired with world's run on the same row and seed (and the same search policy;
# an arm without a policy of its own, "-", is paired with world under each policy run), and
# world run with its policy on with world's policy-off run. Writes the pairs to out "/pairs.tsv"
# and prints Markdown: per arm and policy, the number of pairs, the geometric mean of arm / world
# with a 95% bootstrap interval (rows resampled with replacement, each row's pairs kept together,
# 2,000 resamples, fixed seed), the median ratio and the share of pairs where world is faster;
# then each row's figures (geometric mean over seeds). Needs only POSIX awk (mawk, gawk).
function sift(a, lo, hi,    c, t) { # the heap a[1..hi], rooted at lo
  while ((c = 2 * lo) <= hi) {
    if (c < hi && a[c + 1] > a[c]) c++
    if (a[lo] >= a[c]) return
    t = a[lo]; a[lo] = a[c]; a[c] = t
    lo = c
  }
}
function hsort(a, n,    i, t) { # heapsort, iterative: mawk's evaluation stack is small
  for (i = int(n / 2); i >= 1; i--) sift(a, i, n)
  for (i = n; i > 1; i--) { t = a[1]; a[1] = a[i]; a[i] = t; sift(a, 1, i - 1) }
}
function median(a, n,    m) {
  hsort(a, n)
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function pair(g, row, seed, r, au, wu) {
  if (!(g in gn)) { gorder[++ng] = g; gn[g] = 0 }
  gn[g]++
  gval[g, gn[g]] = r
  if (!((g, row) in rs)) { grows[g, ++gnr[g]] = row; rs[g, row] = 0; rc[g, row] = 0 }
  rs[g, row] += log(r)
  rc[g, row]++
  printf "%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.4f\n", row, g, seed, gpol[g], au, wu, r > (out "/pairs.tsv")
}
NR == 1 { next }
$6 != "-" && $6 > 0 {
  fig[$1, $2, $3, $4] = $6
  if (!($1 in seenrow)) { seenrow[$1] = 1; rows[++nrows] = $1 }
  if (!($2 in seenarm)) { seenarm[$2] = 1; arms[++narms] = $2 }
  if ($2 == "world" && !($3 in seenpol)) { seenpol[$3] = 1; pols[++npols] = $3 }
  key[++nk] = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
}
END {
  printf "row\tcomparison\tseed\tpolicy\tother_us\tworld_us\tother/world\n" > (out "/pairs.tsv")
  for (k = 1; k <= nk; k++) {
    split(key[k], f, SUBSEP)
    row = f[1]; arm = f[2]; pol = f[3]; seed = f[4]
    if (arm == "world") {
      if (pol == "on" && ((row, "world", "off", seed) in fig)) {
        g = "world, policy on"; gpol[g] = "on vs off"
        pair(g, row, seed, fig[row, arm, pol, seed] / fig[row, "world", "off", seed], fig[row, arm, pol, seed], fig[row, "world", "off", seed])
      }
      continue
    }
    for (j = 1; j <= npols; j++) {
      wp = pols[j]
      if (pol != "-" && pol != wp) continue
      if (!((row, "world", wp, seed) in fig)) continue
      g = arm ", policy " wp; gpol[g] = wp
      pair(g, row, seed, fig[row, arm, pol, seed] / fig[row, "world", wp, seed], fig[row, arm, pol, seed], fig[row, "world", wp, seed])
    }
  }
  srand(1)
  B = 2000
  print "| compared with world | pairs | rows | other / world (geomean) | 95% interval | median | world faster |"
  print "|---|---:|---:|---:|---:|---:|---:|"
  for (i = 1; i <= ng; i++) {
    g = gorder[i]; n = gn[g]; nr = gnr[g]
    s = 0
    for (j = 1; j <= n; j++) { v[j] = gval[g, j]; s += log(v[j]) }
    faster = 0
    for (j = 1; j <= n; j++) faster += v[j] > 1
    med = median(v, n)
    for (b = 1; b <= B; b++) {
      ls = 0; lc = 0
      for (j = 1; j <= nr; j++) {
        row = grows[g, int(rand() * nr) + 1]
        ls += rs[g, row]; lc += rc[g, row]
      }
      boot[b] = exp(ls / lc)
    }
    hsort(boot, B)
    printf "| %s | %d | %d | %.3f | %.3f - %.3f | %.3f | %d of %d |\n", g, n, nr, exp(s / n), boot[int(0.025 * B) + 1],
           boot[int(0.975 * B)], med, faster, n
  }
  # each row's figures: the geometric mean over seeds of its runs, per arm and policy
  printf "\n| row |"
  for (a = 1; a <= narms; a++) for (j = 1; j <= npols + 1; j++) {
    p = j <= npols ? pols[j] : "-"
    if (colseen(arms[a], p)) printf " %s%s |", arms[a], p == "-" ? "" : " (" p ")"
  }
  printf "\n|---|"
  for (a = 1; a <= narms; a++) for (j = 1; j <= npols + 1; j++) if (colseen(arms[a], j <= npols ? pols[j] : "-")) printf "---:|"
  printf "\n"
  for (r = 1; r <= nrows; r++) {
    printf "| %s |", rows[r]
    for (a = 1; a <= narms; a++) for (j = 1; j <= npols + 1; j++) {
      p = j <= npols ? pols[j] : "-"
      if (!colseen(arms[a], p)) continue
      s = 0; c = 0
      for (k = 1; k <= nk; k++) {
        split(key[k], f, SUBSEP)
        if (f[1] == rows[r] && f[2] == arms[a] && f[3] == p) { s += log(fig[key[k]]); c++ }
      }
      if (c) printf " %.1f |", exp(s / c); else printf " - |"
    }
    printf "\n"
  }
}
function colseen(arm, p,    k, f) {
  if ((arm, p) in colcache) return colcache[arm, p]
  colcache[arm, p] = 0
  for (k = 1; k <= nk; k++) {
    split(key[k], f, SUBSEP)
    if (f[2] == arm && f[3] == p) { colcache[arm, p] = 1; break }
  }
  return colcache[arm, p]
}
