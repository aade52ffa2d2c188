#!/usr/bin/env bash
# A cluster job on one machine, to try one on a laptop: N learner ranks
# training one model together and M actor-only nodes feeding them
# (docs/several-learners.md, docs/actor-nodes.md; docs/architecture.md §2).
# It starts them, says where to watch, waits for the job to end, and on
# Ctrl-C (or SIGTERM, or SIGHUP: the terminal closed) stops every process it
# started. Its last line says how rank 0 ended and what each node contributed
# (its unrolls). Exit status: rank 0's.
#
#   deploy/local/run.sh                       # 2 ranks, 1 node, CartPole
#   N=3 M=2 CONFIG=configs/pong.toml deploy/local/run.sh --set run.total_steps=2000000
#
# Arguments are passed to every rank's `pronghorn train` (e.g. --set k=v).
set -euo pipefail

# ---- what to run: every knob, from the environment --------------------------
N=${N:-2}                               # learner ranks
M=${M:-1}                               # actor-only nodes (node m joins rank m mod N)
CONFIG=${CONFIG:-}                      # TOML config; empty = the embedded defaults (CartPole)
RUN_NAME=${RUN_NAME:-local-$(date +%Y%m%d-%H%M%S)}
RUN_DIR=${RUN_DIR:-runs}                # the job lives in $RUN_DIR/$RUN_NAME, logs in $RUN_DIR/$RUN_NAME.logs
ACTORS_PER_RANK=${ACTORS_PER_RANK:-auto} # each learner's own actor processes ("auto", or 0 for none)
PROCESSES_PER_NODE=${PROCESSES_PER_NODE:-1}  # actor processes per actor-only node
PRONGHORN=${PRONGHORN:-pronghorn}       # the binary (e.g. build/tools/pronghorn)
START_TIMEOUT_S=${START_TIMEOUT_S:-120} # how long to wait for a rank's address file
# -----------------------------------------------------------------------------

die() { echo "deploy/local: $*" >&2; exit 2; }
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "N=$N: expected a number of learner ranks ≥ 1"
[[ "$M" =~ ^[0-9]+$ ]] || die "M=$M: expected a number of actor-only nodes ≥ 0"
command -v "$PRONGHORN" >/dev/null || die "PRONGHORN=$PRONGHORN: not found (build it, or point PRONGHORN at it)"
[[ -z "$CONFIG" || -f "$CONFIG" ]] || die "CONFIG=$CONFIG: no such file"

job="$RUN_DIR/$RUN_NAME"
logs="$RUN_DIR/$RUN_NAME.logs"
[[ ! -e "$job" ]] || die "$job exists: choose another RUN_NAME"
mkdir -p "$logs"

pids=()
stop_all() {
  trap - INT TERM HUP
  local running=()
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running+=("$pid"); done
  ((${#running[@]})) || return 0
  echo "deploy/local: stopping ${#running[@]} processes" >&2
  kill -TERM "${running[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do  # 10 s for a clean stop (a checkpoint), then SIGKILL
    alive=0
    for pid in "${running[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  kill -KILL "${running[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
trap 'stop_all; exit 129' HUP  # the terminal closed: nothing may outlive it

# Waits for a file a process writes once it listens; fails when the process died.
wait_file() {
  local file=$1 pid=$2 what=$3
  for _ in $(seq 1 $((START_TIMEOUT_S * 10))); do
    [[ -s "$file" ]] && return 0
    kill -0 "$pid" 2>/dev/null || { stop_all; die "$what exited before it listened; see $logs"; }
    sleep 0.1
  done
  stop_all
  die "$what wrote no $file within ${START_TIMEOUT_S} s; see $logs"
}

rank_dir() { if (($1 == 0)); then echo "$job"; else echo "$job/ranks/$1"; fi; }

# With nodes, the ranks start without actors of their own and get them once
# every node's unrolls reach its rank: CartPole is solved in seconds, and the
# job must not end before the nodes it is there to show have contributed.
start_actors=$ACTORS_PER_RANK
((M > 0)) && start_actors=0
train_args=(train --set "run.name=$RUN_NAME" --set "run.dir=$RUN_DIR"
            --set "distributed.world_size=$N" --set "actor.count=$start_actors")
((M > 0)) && train_args+=(--set "remote.address=127.0.0.1:0")
[[ -n "$CONFIG" ]] && train_args+=(--config "$CONFIG")

start_rank() {  # rank, rendezvous address, the script's arguments
  local rank=$1 rendezvous=$2
  shift 2
  "$PRONGHORN" "${train_args[@]}" --set "distributed.rank=$rank" \
    --set "distributed.rendezvous=$rendezvous" --name "local-rank$rank" "$@" \
    >"$logs/rank$rank.log" 2>&1 &
  pids+=($!)
}

start_rank 0 127.0.0.1:0 "$@"
rank0=${pids[0]}
wait_file "$job/rendezvous.address" "$rank0" "rank 0"
rendezvous=$(cat "$job/rendezvous.address")
for ((r = 1; r < N; r++)); do start_rank "$r" "$rendezvous" "$@"; done

for ((m = 0; m < M; m++)); do
  r=$((m % N))
  dir=$(rank_dir "$r")
  wait_file "$dir/remote.address" "${pids[$r]}" "rank $r"
  "$PRONGHORN" actor --learner "$(cat "$dir/remote.address")" --token-file "$job/token" \
    --processes "$PROCESSES_PER_NODE" --name "local-node$m" >"$logs/node$m.log" 2>&1 &
  pids+=($!)
done

# Waits until rank $1's learner has taken unrolls from an actor-only node.
wait_node_unrolls() {
  local rank=$1 address
  address=$(cat "$(rank_dir "$rank")/server.address")
  for _ in $(seq 1 $((START_TIMEOUT_S * 10))); do
    "$PRONGHORN" --log-level error status --target "$address" --token-file "$job/token" --json \
      2>/dev/null | grep -q '"unrolls": [1-9]' && return 0
    kill -0 "${pids[$rank]}" 2>/dev/null || { stop_all; die "rank $rank exited; see $logs"; }
    sleep 0.1
  done
  stop_all
  die "rank $rank took no unroll from its actor-only nodes within ${START_TIMEOUT_S} s; see $logs"
}

if ((M > 0)); then
  for ((r = 0; r < N && r < M; r++)); do
    wait_file "$(rank_dir "$r")/server.address" "${pids[$r]}" "rank $r"
    wait_node_unrolls "$r"
  done
  wanted=$ACTORS_PER_RANK
  [[ "$wanted" == auto ]] && wanted=$(($(nproc) > 1 ? $(nproc) - 1 : 1))  # as actor.count = "auto"
  if ((wanted > 0)); then
    for ((r = 0; r < N; r++)); do
      kill -0 "${pids[0]}" 2>/dev/null || break  # the nodes' unrolls alone ended the job
      wait_file "$(rank_dir "$r")/server.address" "${pids[$r]}" "rank $r"
      "$PRONGHORN" --log-level error scale --target "$(cat "$(rank_dir "$r")/server.address")" \
        --token-file "$job/token" --actors "$wanted" >/dev/null 2>&1 ||
        echo "deploy/local: rank $r did not take scale --actors $wanted (the job ended?)" >&2
    done
  fi
fi

# Paths quoted (%q) so the hints can be pasted as they are, spaces and all.
q_pronghorn=$(printf %q "$PRONGHORN") q_job=$(printf %q "$job")
cat <<EOM
deploy/local: job $RUN_NAME: $N learner ranks, $M actor-only nodes (pids ${pids[*]})
  watch:  $q_pronghorn status --run-dir $q_job --watch
  logs:   $(printf %q "$logs")/
  stop:   Ctrl-C here, or $q_pronghorn stop --run-dir $q_job
EOM

# The job ends when rank 0 does (every rank leaves at the same step; nodes
# leave when they hear the job ended).
status=0
wait "$rank0" || status=$?
for pid in "${pids[@]:1}"; do
  for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
stop_all  # whatever is still there after 20 s
# How rank 0 ended, in its own words (its exit_status: "CODE REASON").
ended="(rank 0 wrote no exit_status: killed by a signal?)"
[[ -s "$job/exit_status" ]] && ended=$(cut -d' ' -f2- "$job/exit_status")
# What each actor-only node contributed, in its own last words.
for ((m = 0; m < M; m++)); do
  tally=$(grep -o 'node [^ ]*: unrolls committed .*' "$logs/node$m.log" | tail -n 1) || true
  ended+="; ${tally:-node $m left no tally (see $logs/node$m.log)}"
done
echo "deploy/local: rank 0 exited $status; $ended"
exit "$status"
