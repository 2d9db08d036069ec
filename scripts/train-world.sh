#!/bin/sh
# Trains the world model and its three ablation models from the shipped data, the way the
# models/ files are made (models/README.md), into OUT (default build/models), then ranks the
# held-out workloads with `cwm eval ranking`. About an hour on 2 cores; nothing else should
# run beside it if its timings (printed as TIME lines) are to mean anything.
#   [SEED=S] scripts/train-world.sh [OUT] [RECORDS]     (RECORDS: default data/measured-0.3.jsonl)
# SEED (default 1, the shipped models') seeds every training step; the trajectories stay seed 1's.
# Trajectories: 4 per training workload (cwm dataset sample), so that the encoder and the
# transition see every workload: --max-traj takes a file's first trajectories, and the file
# is in workload order.
set -e
cd "$(dirname "$0")/.."
OUT=${1:-build/models}
R=${2:-data/measured-0.3.jsonl}
S=${SEED:-1}
CWM=./build/cwm
[ -x "$CWM" ] || { echo "train-world: build cwm first (cmake --build build)" >&2; exit 2; }
[ -f "$R" ] || { echo "train-world: $R missing (xz -dk $R.xz)" >&2; exit 2; }
mkdir -p "$OUT"
t() { s=$(date +%s); "$@"; echo "TIME $(( $(date +%s) - s )) s: $*" >&2; }
t $CWM dataset sample --workloads data/train_workloads.tsv --per-workload 4 --seed 1 --out "$OUT/traj.jsonl"
# the world model: encoder (contrastive), transition (rollouts), value head (records), ranker
t $CWM train all --seed $S --data "$OUT/traj.jsonl" --out "$OUT/enc.cwm" --epochs 2 --max-traj 1700 --batch 32
t $CWM train transition --seed $S --model-file "$OUT/enc.cwm" --data "$OUT/traj.jsonl" --out "$OUT/enc2.cwm" \
    --epochs 4 --max-traj 1700 --targets-cache "$OUT/tc"
t $CWM train transition --seed $S --model-file "$OUT/enc2.cwm" --data "$OUT/traj.jsonl" --out "$OUT/enc3.cwm" \
    --epochs 4 --max-traj 1700 --targets-cache "$OUT/tc" --records "$R" --value-gap 0.15 --weight-decay 0.1
t $CWM train ranker --seed $S --model-file "$OUT/enc3.cwm" --records "$R" --rounds 200 --mode value --out "$OUT/default.cwm"
# ablations: the same model ranking z_0 + action features, or the encoding of the final text
t $CWM train ranker --seed $S --model-file "$OUT/default.cwm" --records "$R" --rounds 40 --mode no-transition \
    --out "$OUT/ablation-no-transition.cwm"
t $CWM train ranker --seed $S --model-file "$OUT/default.cwm" --records "$R" --rounds 40 --mode static \
    --out "$OUT/ablation-static.cwm"
# no contrastive pre-training: the same pipeline from an untrained encoder
t $CWM train all --seed $S --data "$OUT/traj.jsonl" --out "$OUT/nc.cwm" --epochs 2 --max-traj 1700 --batch 32 --no-contrastive
t $CWM train transition --seed $S --model-file "$OUT/nc.cwm" --data "$OUT/traj.jsonl" --out "$OUT/nc2.cwm" \
    --epochs 4 --max-traj 1700 --targets-cache "$OUT/tcnc"
t $CWM train transition --seed $S --model-file "$OUT/nc2.cwm" --data "$OUT/traj.jsonl" --out "$OUT/nc3.cwm" \
    --epochs 4 --max-traj 1700 --targets-cache "$OUT/tcnc" --records "$R" --value-gap 0.15 --weight-decay 0.1
t $CWM train ranker --seed $S --model-file "$OUT/nc3.cwm" --records "$R" --rounds 200 --mode value --out "$OUT/ablation-no-contrastive.cwm"
t $CWM eval ranking --model-file "$OUT/default.cwm" --records "$R" \
    --ablation-model "$OUT/ablation-no-contrastive.cwm" --out "$OUT/eval.md"
echo "train-world: models in $OUT (copy default.cwm and ablation-*.cwm to models/ to ship them)"
