# score_summary.awk: one line of figures from `cwm eval score`'s Markdown (run with -F'|'): the
# means over workloads of its top-1, top-5, NDCG@10 and Kendall tau columns, and the geometric
# means of the model's first pick and of the best of its top 8 over the best latency, tab-separated.
# bench/learning_curve.sh summarizes each run with it.
NF > 9 && $3 ~ /^ *[0-9]+ *$/ && $4 + 0 > 0 {
  n++; t1 += $7; t5 += $8; nd += $9; tau += $10; g += log($5 / $4); g8 += log($6 / $4)
}
END {
  if (n) printf "%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n", t1 / n, t5 / n, nd / n, tau / n, exp(g / n), exp(g8 / n)
}
