#!/usr/bin/env bash
# N `dspark serve` replicas behind HAProxy (prefix affinity, health checks, retries) and a
# Prometheus server scraping every replica and the balancer, all on loopback.
#
#   scripts/cluster.sh start [-n N] [--port P] [--dir DIR] [--api-key KEY] [--no-prometheus] [-- SERVE_ARGS...]
#   scripts/cluster.sh status [--dir DIR]
#   scripts/cluster.sh stop [--dir DIR]
#
# Ports: the balancer on P (default 8080), replica k on P+k (k = 1..N), HAProxy's stats page and
# Prometheus exporter on P+98, Prometheus on P+99. SERVE_ARGS go to every replica (e.g. -m MODEL
# --parallel 2). Logs, pid files and the generated configs live in DIR (default build/cluster of the
# repository, or ./dspark-cluster when run from an install). Needs haproxy (Debian: apt install
# haproxy) and, unless --no-prometheus, prometheus (apt install prometheus). The balancer config is
# deploy/haproxy/dspark.cfg with this cluster's ports and replicas; docs/SERVE.md "Scale-out".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

die() { echo "cluster.sh: $*" >&2; exit 2; }

cmd="${1:-}"
[ -n "$cmd" ] || die "usage: cluster.sh start|status|stop [options] (see the header of $0)"
shift
n=2 port=8080 dir="" api_key="" prom=1 serve_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="${2:?-n needs a number}"; shift 2 ;;
    --port) port="${2:?--port needs a number}"; shift 2 ;;
    --dir) dir="${2:?--dir needs a folder}"; shift 2 ;;
    --api-key) api_key="${2:?--api-key needs a key}"; shift 2 ;;
    --no-prometheus) prom=0; shift ;;
    --) shift; serve_args=("$@"); break ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "-n $n: give 1..64 replicas"
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65435 ] || die "--port $port: give 1..65435"
if [ -z "$dir" ]; then
  if [ -d "$root/.git" ] || [ -f "$root/CMakeLists.txt" ]; then dir="$root/build/cluster"; else dir="$PWD/dspark-cluster"; fi
fi
cfg_src="$root/deploy/haproxy/dspark.cfg"

pids() { ls "$dir"/*.pid 2>/dev/null || true; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

health() {  # health URL -> 0 when it answers 200
  python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

# wait_healthy URL PIDFILE WHAT LOG SECONDS: until URL answers 200; stops everything and fails if
# the process exits or the time runs out.
wait_healthy() {
  local url="$1" pidf="$2" what="$3" log="$4" tries=$(( $5 * 5 )) i
  for i in $(seq 1 "$tries"); do
    health "$url" && return 0
    alive "$pidf" || { tail -5 "$log" >&2; stop_all; die "$what exited (log: $log)"; }
    sleep 0.2
  done
  stop_all
  die "$what not ready after $5 s (log: $log)"
}

stop_all() {
  # Replicas first (SIGTERM: they drain, /health turns 503 and the balancer stops sending), then the
  # balancer and Prometheus.
  local f
  for f in "$dir"/replica-*.pid "$dir"/haproxy.pid "$dir"/prometheus.pid; do
    [ -f "$f" ] || continue
    alive "$f" && kill -TERM "$(cat "$f")" 2>/dev/null || true
  done
  for f in "$dir"/replica-*.pid "$dir"/haproxy.pid "$dir"/prometheus.pid; do
    [ -f "$f" ] || continue
    for _ in $(seq 1 150); do alive "$f" || break; sleep 0.1; done
    if alive "$f"; then kill -KILL "$(cat "$f")" 2>/dev/null || true; fi
    rm -f "$f"
  done
}

case "$cmd" in
  stop)
    [ -d "$dir" ] || die "$dir: no cluster here"
    stop_all
    echo "cluster.sh: stopped ($dir)"
    ;;
  status)
    [ -d "$dir" ] || die "$dir: no cluster here"
    for f in $(pids); do
      name=$(basename "$f" .pid)
      if alive "$f"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: not running"; fi
    done
    ;;
  start)
    command -v haproxy >/dev/null || die "haproxy not found (Debian: apt install haproxy)"
    [ "$prom" = 0 ] || command -v prometheus >/dev/null || die "prometheus not found (apt install prometheus, or --no-prometheus)"
    [ -f "$cfg_src" ] || die "$cfg_src: the balancer config is missing"
    bin="${DSPARK_BIN:-}"
    for c in "$root/build/release/dspark" "$root/../../bin/dspark" "$(command -v dspark || true)"; do
      [ -n "$bin" ] && break
      [ -n "$c" ] && [ -x "$c" ] && bin="$c"
    done
    [ -n "$bin" ] || die "no dspark binary (build it, install it, or set DSPARK_BIN)"
    mkdir -p "$dir"
    for f in $(pids); do alive "$f" && die "$dir: a cluster is already running here (cluster.sh stop --dir $dir)"; done
    rm -f "$dir"/*.pid
    key_args=()
    [ -z "$api_key" ] || key_args=(--api-key "$api_key")
    for k in $(seq 1 "$n"); do
      "$bin" serve --host 127.0.0.1 --port $((port + k)) "${key_args[@]}" "${serve_args[@]}" >"$dir/replica-$k.log" 2>&1 &
      echo $! >"$dir/replica-$k.pid"
    done
    for k in $(seq 1 "$n"); do
      wait_healthy "http://127.0.0.1:$((port + k))/health" "$dir/replica-$k.pid" "replica $k" "$dir/replica-$k.log" 120
    done
    # The balancer: the checked-in config with this cluster's ports and replicas.
    python3 - "$cfg_src" "$dir/haproxy.cfg" "$port" "$n" <<'EOF'
import re, sys
src, dst, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out, skip = [], False
for line in open(src):
    if "@SERVERS@" in line:
        out.append(line)
        out += [f"    server r{k} 127.0.0.1:{port + k}\n" for k in range(1, n + 1)]
        skip = True
        continue
    if "@END@" in line:
        skip = False
    if skip:
        continue
    if "@BIND@" in line:
        line = re.sub(r"bind \S+", f"bind 127.0.0.1:{port}", line)
    if "@STATS@" in line:
        line = re.sub(r"bind \S+", f"bind 127.0.0.1:{port + 98}", line)
    out.append(line)
open(dst, "w").write("".join(out))
EOF
    haproxy -c -q -f "$dir/haproxy.cfg" || { stop_all; die "$dir/haproxy.cfg: invalid (haproxy -c)"; }
    haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
    echo $! >"$dir/haproxy.pid"
    wait_healthy "http://127.0.0.1:$((port + 98))/metrics" "$dir/haproxy.pid" haproxy "$dir/haproxy.log" 20
    if [ "$prom" = 1 ]; then
      {
        echo "global:"
        echo "  scrape_interval: 1s"
        echo "  evaluation_interval: 5s"
        echo "scrape_configs:"
        echo "  - job_name: dspark"
        if [ -n "$api_key" ]; then
          echo "    authorization:"
          echo "      credentials: \"$api_key\""
        fi
        echo "    static_configs:"
        echo "      - targets: [$(for k in $(seq 1 "$n"); do printf '"127.0.0.1:%d"' $((port + k)); [ "$k" -lt "$n" ] && printf ', '; done)]"
        echo "  - job_name: haproxy"
        echo "    static_configs:"
        echo "      - targets: [\"127.0.0.1:$((port + 98))\"]"
      } >"$dir/prometheus.yml"
      prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus-data" \
        --web.listen-address="127.0.0.1:$((port + 99))" >"$dir/prometheus.log" 2>&1 &
      echo $! >"$dir/prometheus.pid"
      wait_healthy "http://127.0.0.1:$((port + 99))/-/ready" "$dir/prometheus.pid" prometheus "$dir/prometheus.log" 20
    fi
    echo "cluster.sh: $n replica(s) on 127.0.0.1:$((port + 1))..$((port + n)), balancer http://127.0.0.1:$port/v1," \
         "HAProxy stats http://127.0.0.1:$((port + 98))/$([ "$prom" = 1 ] && echo ", Prometheus http://127.0.0.1:$((port + 99))/") (dir $dir)"
    ;;
  *) die "unknown command '$cmd' (start, status, stop)" ;;
esac
