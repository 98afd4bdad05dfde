#!/usr/bin/env bash
# bench_children.sh - the explorer on large training graphs: states per second of this build
# against a control build (another commit, built apart), side by side and alternating, and the
# scaling of --threads 2 over --threads 1 against the control ratio (two independent 1-thread
# searches running at once: what two searches get from this machine at all), on the
# GPT-Neo-1.3B-shaped GPT (bench/gen_gpt_neo_shape.py, --shape batch=8) and on BERT-base
# (tests/fixtures/structure/bert_base_s512_b8.onnx). Each row gives the load average when it
# started. docs/BENCHMARKS.md has the figures.
#   bench/bench_children.sh speed NEW_MAGPIE CTRL_MAGPIE [SECONDS] [REPS]
#   bench/bench_children.sh threads MAGPIE [SECONDS] [REPS]
# threads: per repetition, one 1-thread search, then two 1-thread searches at once (the
# control), then one 2-thread search, each SECONDS of search (states/s counts the search phase
# only: report.json's wall_seconds.search, not the import, autodiff and F-Tree before it); the
# "of control" column is (2t / 1t) / ((pair sum) / 1t), its median over the repetitions last.
#   bench/bench_children.sh work MAGPIE [MAX_STATES] [REPS]   (threads, at equal work)
#   bench/bench_children.sh same NEW_MAGPIE CTRL_MAGPIE [MAX_STATES]   (identical plans)
#   bench/bench_children.sh cpu NEW_MAGPIE CTRL_MAGPIE [MAX_STATES] [REPS]
#   bench/bench_children.sh side NEW_MAGPIE CTRL_MAGPIE [MAX_STATES] [REPS] [MODELS]
# cpu: the CPU seconds (user + sys) the search of MAX_STATES states costs, with --threads 1 and
# the same deterministic work in both builds: a run of MAX_STATES less one of 1 state (the
# start: import, autodiff, F-Tree, the start order). The machine's load stretches wall time but
# hardly the CPU time of a given piece of work, so this ratio holds under load as states/s does
# not.
# side: per repetition, alternating, NEW, CTRL and CTRL again (the control row: the control
# against itself) on the same --threads 1 --max-states MAX_STATES search, each giving states/s
# (the report's states_per_second, wall clock) and states per CPU-second (MAX_STATES less one
# over the CPU seconds less those of a 1-state run of the same build, measured in the same
# repetition); then the medians and their ratios. MODELS: "gpt8 bert" by default.
# GPT=path overrides the GPT model (default out/bench/gpt_neo_1p3b.onnx, made when missing);
# MODELS="bert" (work) runs one of the two models only.
set -euo pipefail
cd "$(dirname "$0")/.."
gpt=${GPT:-out/bench/gpt_neo_1p3b.onnx}
bert=tests/fixtures/structure/bert_base_s512_b8.onnx
[ -f "$gpt" ] || /usr/bin/python3 bench/gen_gpt_neo_shape.py "$gpt" >&2
# the same graph with its batch 8 in the file, for the comparisons with a control build that
# fails after the search on a symbolic batch (main at 22b5c67)
gpt8=${gpt%.onnx}_b8.onnx
[ -f "$gpt8" ] || /usr/bin/python3 bench/gen_gpt_neo_shape.py --bind8 "$gpt" "$gpt8" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

args_of() { # model key -> optimize arguments
  case $1 in
  gpt) echo "$gpt --shape batch=8" ;;
  gpt8) echo "$gpt8" ;;
  bert) echo "$bert" ;;
  esac
}
common=(--train --lat-limit 1.10 --seed 1 --quiet --json)
load() { cut -d' ' -f1 /proc/loadavg; }
# states/s, states explored, best peak ratio of a report
figures() {
  /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.1f %d %.4f %s" % (r["states_per_second"], r["states_explored"], r["peak_ratio"],
                           r["best_fingerprint"]))' "$1"
}
# the workers' thread CPU seconds and idle wall seconds of a report (report.json "workers")
workers() {
  /usr/bin/python3 -c '
import json, sys
w = json.load(open(sys.argv[1])).get("workers", {})
print("%.2f %.2f" % (w.get("cpu_seconds", float("nan")), w.get("idle_seconds", float("nan"))))' "$1"
}
run() { # out bin model threads secs [extra...]
  local out=$1 bin=$2 model=$3 threads=$4 secs=$5
  shift 5
  # shellcheck disable=SC2046
  "$bin" optimize $(args_of "$model") "${common[@]}" --threads "$threads" --time "$secs" \
    -o "$work/o.$RANDOM" "$@" >"$out" 2>/dev/null || true
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# One repetition of the threads comparison: a 1-thread search, two 1-thread searches at once
# (the control), one 2-thread search, each with `run`'s SECS and EXTRA. Sets l (the load),
# s1 a b s2 (states/s), f1 f2 (the 1- and 2-thread best fingerprints), tr cr of (2t/1t, the
# control, their ratio; of is appended to r.q), u1 ua ub u2 (the workers' CPU seconds: on a
# loaded machine a process's threads share its time slice) and i2 (the 2-thread workers' idle
# seconds).
pair_round() { # bin model secs [extra...]
  local bin=$1 model=$2 secs=$3
  shift 3
  l=$(load)
  run "$work/one.json" "$bin" "$model" 1 "$secs" "$@"
  run "$work/c1.json" "$bin" "$model" 1 "$secs" "$@" &
  run "$work/c2.json" "$bin" "$model" 1 "$secs" "$@" &
  wait
  run "$work/two.json" "$bin" "$model" 2 "$secs" "$@"
  read -r s1 _ _ f1 <<<"$(figures "$work/one.json")"
  read -r a _ _ _ <<<"$(figures "$work/c1.json")"
  read -r b _ _ _ <<<"$(figures "$work/c2.json")"
  read -r s2 _ _ f2 <<<"$(figures "$work/two.json")"
  read -r tr cr of <<<"$(awk -v s1="$s1" -v s2="$s2" -v a="$a" -v b="$b" \
    'BEGIN {printf "%.2f %.2f %.2f", s2 / s1, (a + b) / s1, (s2 / s1) / ((a + b) / s1)}')"
  echo "$of" >>"$work/r.q"
  read -r u1 _ <<<"$(workers "$work/one.json")"
  read -r ua _ <<<"$(workers "$work/c1.json")"
  read -r ub _ <<<"$(workers "$work/c2.json")"
  read -r u2 i2 <<<"$(workers "$work/two.json")"
}

mode=${1:?speed, threads, work, same, cpu or side}
shift
case $mode in
speed)
  new=$1 ctl=$2 secs=${3:-20} reps=${4:-3}
  for model in gpt8 bert; do
    : >"$work/r.new" && : >"$work/r.ctl"
    for rep in $(seq 1 "$reps"); do
      l=$(load)
      run "$work/n.json" "$new" $model 1 "$secs"
      run "$work/c.json" "$ctl" $model 1 "$secs"
      read -r n _ np _ <<<"$(figures "$work/n.json")"
      read -r c _ cp _ <<<"$(figures "$work/c.json")"
      echo "$n" >>"$work/r.new" && echo "$c" >>"$work/r.ctl"
      printf "%-5s rep %d load %5s  new %7.1f st/s (peak %.3f)  control %7.1f st/s (peak %.3f)\n" \
        $model "$rep" "$l" "$n" "$np" "$c" "$cp"
    done
    mn=$(median <"$work/r.new") mc=$(median <"$work/r.ctl")
    printf "%-5s median new %.1f control %.1f ratio %.2f\n" $model "$mn" "$mc" \
      "$(awk -v a="$mn" -v b="$mc" 'BEGIN {print a / b}')"
  done
  ;;
threads)
  bin=$1 secs=${2:-20} reps=${3:-3}
  for model in gpt bert; do
    : >"$work/r.q"
    for rep in $(seq 1 "$reps"); do
      pair_round "$bin" $model "$secs"
      printf "%-5s rep %d load %5s  1t %6.1f  2x1t %6.1f+%6.1f  2t %6.1f  2t/1t %s  control %s  of control %s  cpu-s 1t %s pair %s+%s 2t %s (idle %s)\n" \
        $model "$rep" "$l" "$s1" "$a" "$b" "$s2" "$tr" "$cr" "$of" "$u1" "$ua" "$ub" "$u2" "$i2"
    done
    printf "%-5s median of control %s (load now %s)\n" $model "$(median <"$work/r.q")" "$(load)"
  done
  ;;
work)
  # the same comparison at equal work: every search explores the same MAX_STATES states (one
  # thread's search; two threads share children on these graphs and run that search too, which
  # the "same plan" column checks), so a rising cost per state along the search (the root's
  # children are cheaper than those of fission states) cannot favour the pair, whose searches
  # each get half the CPU and stay early in the search in a fixed time
  bin=$1 k=${2:-400} reps=${3:-3}
  for model in ${MODELS:-gpt bert}; do
    : >"$work/r.q"
    for rep in $(seq 1 "$reps"); do
      pair_round "$bin" $model 600 --max-states "$k"
      printf "%-5s rep %d load %5s  %d states: 1t %6.1f st/s  2x1t %6.1f+%6.1f  2t %6.1f  2t/1t %s  control %s  of control %s  cpu-s 1t %s pair %s+%s 2t %s (idle %s)  same plan %s\n" \
        $model "$rep" "$l" "$k" "$s1" "$a" "$b" "$s2" "$tr" "$cr" "$of" "$u1" "$ua" "$ub" "$u2" "$i2" \
        "$([ "$f1" = "$f2" ] && echo yes || echo NO)"
    done
    printf "%-5s median of control %s (load now %s)\n" $model "$(median <"$work/r.q")" "$(load)"
  done
  ;;
same)
  new=$1 ctl=$2 k=${3:-200}
  for model in gpt8 bert; do
    run "$work/n.json" "$new" $model 1 600 --max-states "$k"
    run "$work/c.json" "$ctl" $model 1 600 --max-states "$k"
    fn=$(figures "$work/n.json" | cut -d' ' -f2-) fc=$(figures "$work/c.json" | cut -d' ' -f2-)
    printf "%-5s new: %s  control: %s  %s\n" $model "$fn" "$fc" \
      "$([ "$fn" = "$fc" ] && echo identical || echo DIFFERENT)"
  done
  ;;
cpu)
  new=$1 ctl=$2 k=${3:-200} reps=${4:-3}
  cpus() { # bin model states -> CPU seconds of the whole run
    /usr/bin/time -f "%U %S" -o "$work/t" "$1" optimize $(args_of "$2") "${common[@]}" \
      --threads 1 --time 600 --max-states "$3" -o "$work/o.$RANDOM" >/dev/null 2>&1 || true
    tail -n 1 "$work/t" | awk '{print $1 + $2}'
  }
  for model in gpt8 bert; do
    : >"$work/r.new" && : >"$work/r.ctl"
    for rep in $(seq 1 "$reps"); do
      l=$(load)
      n=$(awk -v a="$(cpus "$new" $model "$k")" -v b="$(cpus "$new" $model 1)" 'BEGIN {print a - b}')
      c=$(awk -v a="$(cpus "$ctl" $model "$k")" -v b="$(cpus "$ctl" $model 1)" 'BEGIN {print a - b}')
      echo "$n" >>"$work/r.new" && echo "$c" >>"$work/r.ctl"
      printf "%-5s rep %d load %5s  %d states: new %6.2f cpu-s (%6.1f st/cpu-s)  control %6.2f cpu-s (%6.1f st/cpu-s)\n" \
        $model "$rep" "$l" "$k" "$n" "$(awk -v n="$n" -v k="$k" 'BEGIN {print (k - 1) / n}')" \
        "$c" "$(awk -v n="$c" -v k="$k" 'BEGIN {print (k - 1) / n}')"
    done
    mn=$(median <"$work/r.new") mc=$(median <"$work/r.ctl")
    printf "%-5s median new %.2f cpu-s control %.2f cpu-s: %.2fx the states per cpu-second\n" \
      $model "$mn" "$mc" "$(awk -v a="$mn" -v b="$mc" 'BEGIN {print b / a}')"
  done
  ;;
side)
  new=$1 ctl=$2 k=${3:-400} reps=${4:-3} models=${5:-gpt8 bert}
  one() { # bin model states -> "CPU-seconds states/s"
    /usr/bin/time -f "%U %S" -o "$work/t" "$1" optimize $(args_of "$2") "${common[@]}" \
      --threads 1 --time 600 --max-states "$3" -o "$work/o.$RANDOM" >"$work/s.json" 2>/dev/null || true
    echo "$(tail -n 1 "$work/t" | awk '{print $1 + $2}') $(figures "$work/s.json" | cut -d' ' -f1)"
  }
  for model in $models; do
    for f in ns nc cs cc xs xc; do : >"$work/r.$f"; done
    for rep in $(seq 1 "$reps"); do
      l=$(load)
      read -r n1 _ <<<"$(one "$new" $model 1)"
      read -r nk ns <<<"$(one "$new" $model "$k")"
      read -r c1 _ <<<"$(one "$ctl" $model 1)"
      read -r ck cs <<<"$(one "$ctl" $model "$k")"
      read -r xk xs <<<"$(one "$ctl" $model "$k")"
      nc=$(awk -v a="$nk" -v b="$n1" -v k="$k" 'BEGIN {print (k - 1) / (a - b)}')
      cc=$(awk -v a="$ck" -v b="$c1" -v k="$k" 'BEGIN {print (k - 1) / (a - b)}')
      xc=$(awk -v a="$xk" -v b="$c1" -v k="$k" 'BEGIN {print (k - 1) / (a - b)}')
      echo "$ns" >>"$work/r.ns" && echo "$nc" >>"$work/r.nc" && echo "$cs" >>"$work/r.cs"
      echo "$cc" >>"$work/r.cc" && echo "$xs" >>"$work/r.xs" && echo "$xc" >>"$work/r.xc"
      printf "%-5s %d states rep %d load %5s  new %6.1f st/s %6.1f st/cpu-s  control %6.1f st/s %6.1f st/cpu-s  control again %6.1f st/s %6.1f st/cpu-s (1-state cpu-s %.2f %.2f)\n" \
        $model "$k" "$rep" "$l" "$ns" "$nc" "$cs" "$cc" "$xs" "$xc" "$n1" "$c1"
    done
    for f in ns nc cs cc xs xc; do eval "m_$f=$(median <"$work/r.$f")"; done
    # shellcheck disable=SC2154
    printf "%-5s %d states medians: new %.1f st/s %.1f st/cpu-s, control %.1f st/s %.1f st/cpu-s, control again %.1f st/s %.1f st/cpu-s; new/control %.2f st/s %.2f st/cpu-s; control/control %.2f st/s %.2f st/cpu-s\n" \
      $model "$k" "$m_ns" "$m_nc" "$m_cs" "$m_cc" "$m_xs" "$m_xc" \
      "$(awk -v a="$m_ns" -v b="$m_cs" 'BEGIN {print a / b}')" "$(awk -v a="$m_nc" -v b="$m_cc" 'BEGIN {print a / b}')" \
      "$(awk -v a="$m_xs" -v b="$m_cs" 'BEGIN {print a / b}')" "$(awk -v a="$m_xc" -v b="$m_cc" 'BEGIN {print a / b}')"
  done
  ;;
*)
  echo "usage: $0 speed|threads|work|same|cpu|side ..." >&2
  exit 2
  ;;
esac
