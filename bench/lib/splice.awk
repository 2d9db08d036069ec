# splice.awk: FILE with what lies between its lines <!-- m:begin --> and <!-- m:end --> replaced
# by the contents of the file md (the markers stay). bench/heldout.sh and bench/ablation.sh write
# their tables into the README and REPORT.md with it: awk -v md=TABLE.md -v m=NAME -f splice.awk FILE
$0 == "<!-- " m ":begin -->" { print; while ((getline l < md) > 0) print l; skip = 1; next }
$0 == "<!-- " m ":end -->" { skip = 0 }
!skip { print }
