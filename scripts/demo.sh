#!/usr/bin/env bash
# make demo: three cshare nodes on loopback in a temporary dir. Creates an org,
# joins and approves two machines, shows the org from every node, runs a job
# across all three, lets a second job take its share, rents one of node 1's
# (recorded) GPUs through an offer and a contract when Docker is there, and
# stops. KEEP=1 leaves the nodes running.
set -euo pipefail
cd "$(dirname "$0")/.."
B="$PWD/bin/cshare"
[ -x "$B" ] || { echo "demo: $B is missing; run make build" >&2; exit 1; }
DIR=$(mktemp -d /tmp/cshare-demo.XXXXXX)
BASE=${DEMO_PORT:-$((20000 + RANDOM % 20000))}
PIDS=()
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
N1ID=""
cleanup() {
  if [ "${KEEP:-0}" = 1 ]; then return; fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$N1ID" ]; then
    docker ps -aq --filter "label=cshare.machine=$N1ID" --filter label=cshare.contract | xargs -r docker rm -f -v >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# The demo's jobs use the docker driver when an engine is reachable, else the
# exec driver (plain processes), which each node enables in its node.yaml.
DRIVER=docker
if ! docker info >/dev/null 2>&1; then DRIVER=exec; fi

step "starting 3 nodes in $DIR (logs: $DIR/nodeN.log)"
for i in 1 2 3; do
  mkdir -p "$DIR/node$i"
  cat > "$DIR/node$i/node.yaml" <<EOF
name: demo-$i
resources:
  max_concurrent_jobs: 4
runtime:
  exec: true
EOF
  # Node 1 rents out two GPUs it does not have: their device requests are recorded.
  if [ "$i" = 1 ] && [ "$DRIVER" = docker ]; then echo "  record_gpus: 2" >> "$DIR/node$i/node.yaml"; fi
  "$B" node run --data-dir "$DIR/node$i" --api 127.0.0.1:0 \
    --listen /ip4/127.0.0.1/tcp/$((BASE + i)) --listen /ip4/127.0.0.1/udp/$((BASE + i))/quic-v1 \
    --config "$DIR/node$i/node.yaml" --heartbeat-interval 2s >"$DIR/node$i.log" 2>&1 &
  PIDS+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 100); do [ -s "$DIR/node$i/api.addr" ] && break; sleep 0.1; done
done
c() { local i=$1; shift; "$B" --data-dir "$DIR/node$i" "$@"; }

step "node 1 creates the org: its person, olive, is the owner"
printf '$ cshare org create --name demo-org --user-name olive\n'
KEY=$(c 1 org create --name demo-org --description "make demo" --user-name olive | tail -n 1)
echo "org key: ${KEY:0:40}..."

step "mo makes a person key on node 2 and carries it to node 3: two machines, one member"
printf '$ cshare user init --name mo        (node 2)\n'
c 2 user init --name mo
printf '$ cshare user export --out mo.person (node 2);  cshare user import mo.person (node 3)\n'
c 2 user export --out "$DIR/mo.person" >/dev/null
c 3 user import "$DIR/mo.person"

step "nodes 2 and 3 join with the org key (pending until approved)"
printf '$ cshare node join --org-key KEY (on node 2 and node 3)\n'
c 2 node join --org-key "$KEY"
c 3 node join --org-key "$KEY"
c 1 machine ls

step "node 1 (the owner) approves them"
for i in 2 3; do
  id=$(c "$i" node status --json | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | head -n 1)
  printf '$ cshare machine approve %s\n' "$id"
  c 1 machine approve "$id"
done

step "waiting until every node sees 3 available machines"
for _ in $(seq 100); do
  ok=0
  for i in 1 2 3; do
    n=$(c "$i" machine ls --json | grep -o '"status": "available"' | wc -l || true)
    [ "$n" -ge 3 ] && ok=$((ok + 1))
  done
  [ "$ok" = 3 ] && break
  sleep 0.2
done
for i in 1 2 3; do
  echo "--- node $i: machine ls"
  c "$i" machine ls
done
for i in 1 2 3; do
  echo "--- node $i: org show"
  c "$i" org show
done
echo "--- node 1: member ls (persons, with their machines)"
c 1 member ls

step "a job from node 2 spreads over the three machines (driver: $DRIVER)"
IMG=()
[ "$DRIVER" = docker ] && IMG=(--image cshare-busybox:latest)
printf '$ cshare job submit --driver %s --cpus 2 --max-cpus 10 --range 1-40 -- sh -c '"'"'echo frame $CSHARE_ITEM on $CSHARE_MACHINE; sleep 1'"'"'\n' "$DRIVER"
J1=$(c 2 job submit --driver "$DRIVER" "${IMG[@]}" --priority 10 --cpus 2 --max-cpus 10 --range 1-40 -- sh -c 'echo frame $CSHARE_ITEM on $CSHARE_MACHINE; sleep 1' | tail -n 1)
for _ in $(seq 50); do
  r=$(c 1 job show "$J1" --json | grep -c '"state": "running"' || true)
  [ "$r" -ge 6 ] && break
  sleep 0.2
done
c 1 job show "$J1"

step "a second job from node 3 takes its share (secondaries rebalance)"
J2=$(c 3 job submit --driver "$DRIVER" "${IMG[@]}" --priority 10 --cpus 2 --max-cpus 10 --range 1-20 -- sh -c 'echo second $CSHARE_ITEM; sleep 1' | tail -n 1)
sleep 3
echo "--- node 1 (olive, the owner) sees every job:"
c 1 job ls
J0=$(c 1 job submit --driver "$DRIVER" "${IMG[@]}" --name olive-only --priority 10 --cpus 1 -- sh -c 'echo olive' | tail -n 1)
echo "--- node 3 (mo, a member) sees only mo's jobs, not olive's $J0:"
c 3 job ls

step "waiting for both jobs to finish"
for _ in $(seq 600); do
  s1=$(c 1 job show "$J1" --json | sed -n 's/^  "state": "\([a-z]*\)".*/\1/p')
  s2=$(c 1 job show "$J2" --json | sed -n 's/^  "state": "\([a-z]*\)".*/\1/p')
  case "$s1$s2" in donedone) break ;; esac
  case "$s1 $s2" in *failed*|*cancelled*) echo "demo: a job ended $s1/$s2" >&2; c 1 job show "$J1"; c 1 job show "$J2"; exit 1 ;; esac
  sleep 0.5
done
c 1 job ls
c 1 machine ls
echo "--- output of item 7 of job $J1, asked of node 1 (kept on the machine that ran it, fetched from there):"
c 1 job logs "$J1" --item 7
[ "$s1$s2" = donedone ] || { echo "demo: jobs did not finish" >&2; exit 1; }

if [ "$DRIVER" = docker ]; then
  step "the market: olive offers node 1's two GPUs (recorded: no GPU here); mo rents one from node 3"
  N1ID=$(c 1 node status --json | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | head -n 1)
  printf '$ cshare offer create --price 1.2 --gpus 2 --cpus 1 --memory 512m --disk 1g --for 2h   (node 1)\n'
  OFFER=$(c 1 offer create --price 1.2 --gpus 2 --cpus 1 --memory 512m --disk 1g --for 2h | tail -n 1)
  for _ in $(seq 100); do c 3 offer ls --json | grep -q "$OFFER" && break; sleep 0.1; done
  printf '$ cshare offer ls gpus>=1 price<2   (node 3)\n'
  c 3 offer ls 'gpus>=1' 'price<2'
  printf '$ cshare contract create %s --image cshare-busybox:latest --gpus 1 --for 1h -- sleep 3600   (node 3)\n' "$OFFER"
  CT=$(c 3 contract create "$OFFER" --image cshare-busybox:latest --gpus 1 --for 1h -- sleep 3600 | tail -n 1)
  for _ in $(seq 100); do c 1 contract show "$CT" --json | grep -q '"state": "running"' && break; sleep 0.2; done
  for _ in $(seq 100); do [ -n "$(docker ps -q --filter "label=cshare.contract=$CT")" ] && break; sleep 0.2; done
  c 1 contract show "$CT"
  echo "--- its container on node 1's Docker engine:"
  docker ps --filter "label=cshare.contract=$CT" --format '{{.Names}}  {{.Status}}  gpus={{.Label "cshare.gpus"}} ({{.Label "cshare.gpu_mode"}})'
  printf '$ cshare contract rm %s   (node 3)\n' "$CT"
  c 3 contract rm "$CT"
  for _ in $(seq 100); do [ -z "$(docker ps -aq --filter "label=cshare.contract=$CT")" ] && break; sleep 0.2; done
  c 1 contract usage
fi

step "plan agreement: every node computed the same SmartShare plan"
for _ in $(seq 100); do
  agree=0
  for i in 1 2 3; do
    if c "$i" node status --json | grep -q '"plan_agree": 2'; then agree=$((agree + 1)); fi
  done
  [ "$agree" = 3 ] && break
  sleep 0.2
done
for i in 1 2 3; do c "$i" node status | grep -E '^(id|plan):'; done

if [ "${KEEP:-0}" = 1 ]; then
  step "KEEP=1: the nodes keep running"
  for i in 1 2 3; do echo "node $i: API $(cat "$DIR/node$i/api.addr")  data dir $DIR/node$i  (cshare --data-dir $DIR/node$i ...)"; done
  echo "dashboard: $(c 1 node dashboard)   stop with: kill ${PIDS[*]}"
  exit 0
fi
step "stopping the nodes"
for i in 1 2 3; do c "$i" node stop; done
wait "${PIDS[@]}" 2>/dev/null || true
echo "demo finished: logs and data in $DIR"
