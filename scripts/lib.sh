# Shared by the bench scripts: `measure NAME RUNS COMMAND...` prints the median
# wall time (s) and peak RSS (KiB) of RUNS whole-process runs of COMMAND.
measure() {
  local name=$1 runs=$2; shift 2
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1
  done | sort -n | sed -n "$(( (runs + 1) / 2 ))p" | {
    read -r secs kib
    printf '%-44s %8s s %10s KiB\n' "$name" "$secs" "$kib"
  }
}
