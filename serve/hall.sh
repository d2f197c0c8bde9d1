#!/usr/bin/env bash
# A lecture hall on one machine: N `streamlit run app.py` processes behind nginx.
#
#   serve/hall.sh up [N]      start N app processes (default: one per core) and nginx in front
#   serve/hall.sh down        stop them
#   serve/hall.sh status      what runs, and each process's /_stcore/health
#
# Settings (environment):
#   HALL_ADDRESS   the address nginx listens on (default 127.0.0.1: loopback only). For a class on a
#                  LAN, give the machine's LAN address (e.g. 192.168.1.20), never 0.0.0.0.
#   HALL_PORT      nginx's port (default 8501)
#   HALL_HOSTS     Host names visitors may use, comma-separated (default: localhost, 127.0.0.1 and
#                  HALL_ADDRESS): nginx answers others with nothing, the app processes refuse their websockets
#   HALL_APP_BASE  the first app process's port (default 8601; they listen on 127.0.0.1 only)
#   HALL_DIR       run files: nginx.conf, pids, logs (default /tmp/specviz-hall)
#
# Needs nginx: Debian/Ubuntu `sudo apt-get install -y nginx` (the system service need not run:
# this script starts its own nginx with its own config, as the current user, on HALL_PORT).
#
# What nginx adds: one address for all the processes; websockets passed through (Upgrade headers,
# long timeouts); each visitor kept on one process (a cookie nginx sets, hashed: a session lives in
# one process's memory); a process that stops answering is
# skipped (max_fails/fail_timeout), and a visitor whose process died reconnects to another one with
# the same link (every setting is in the link). What it does not add by itself: TLS and access
# control (see docs/serving.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ADDRESS="${HALL_ADDRESS:-127.0.0.1}"
PORT="${HALL_PORT:-8501}"
APP_BASE="${HALL_APP_BASE:-8601}"
DIR="${HALL_DIR:-/tmp/specviz-hall}"
HOSTS="${HALL_HOSTS:-localhost,127.0.0.1,$ADDRESS}"
PYTHON="${PYTHON:-python}"
MAX_PROCS=64
START_TIMEOUT_S=90

die() { echo "hall.sh: $*" >&2; exit 1; }

nginx_bin() {
    command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || \
        die "nginx is not installed: sudo apt-get install -y nginx (Debian/Ubuntu)"
}

health() {  # prints the HTTP status of /_stcore/health at 127.0.0.1:$1, or 000
    curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/_stcore/health" || true
}

write_conf() {  # $1 = number of processes
    local servers="" i
    for ((i = 0; i < $1; i++)); do
        servers+="        server 127.0.0.1:$((APP_BASE + i)) max_fails=1 fail_timeout=10s;"$'\n'
    done
    cat > "$DIR/nginx.conf" <<CONF
# Written by serve/hall.sh: $1 specviz processes behind one address.
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/nginx-error.log warn;
events { worker_connections 1024; }
http {
    log_format hall '\$remote_addr [\$time_local] "\$request" \$status upstream=\$upstream_addr';
    access_log $DIR/nginx-access.log hall;
    client_body_temp_path $DIR/tmp/body;
    proxy_temp_path $DIR/tmp/proxy;
    fastcgi_temp_path $DIR/tmp/fastcgi;
    uwsgi_temp_path $DIR/tmp/uwsgi;
    scgi_temp_path $DIR/tmp/scgi;
    map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
    # One visitor, one process: a websocket is one connection, so it stays where it was opened, and the
    # visitor's other requests (download_button files live in one process's memory) follow the cookie
    # nginx sets on the first answer. Not ip_hash: it hashes only three bytes of an IPv4 address, so a
    # whole classroom LAN (192.168.1.x) would land on one process.
    map \$cookie_specviz_hall \$hall_key { "" \$request_id; default \$cookie_specviz_hall; }
    upstream specviz {
        hash \$hall_key consistent;
$servers    }
    server {  # a Host header that is not one of the hall's: close the connection without an answer
        listen $ADDRESS:$PORT default_server;
        return 444;
    }
    server {
        listen $ADDRESS:$PORT;
        server_name $(echo "$HOSTS" | tr ',' '\n' | sort -u | tr '\n' ' ');
        # Only the /_stcore/health answer of a process is the proxy's to show; metrics stay inside.
        location = /_stcore/metrics { return 404; }
        location / {
            add_header Set-Cookie "specviz_hall=\$hall_key; Path=/; HttpOnly; SameSite=Lax" always;
            proxy_pass http://specviz;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            # The visitor's Host, which the app checks against its allowed hosts (and its Origin against).
            proxy_set_header Host \$http_host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_read_timeout 1h;  # a websocket idles between clicks
            proxy_send_timeout 1h;
            proxy_next_upstream error timeout http_502 http_503;  # a dead process: try the next one
            proxy_connect_timeout 2s;
        }
    }
}
CONF
}

up() {
    local n="${1:-$(nproc)}" i pid port code deadline h
    local -a hosts=()
    for h in ${HOSTS//,/ }; do hosts+=(--server.allowedHosts "$h"); done
    [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= MAX_PROCS)) || die "N: expected an integer in [1, $MAX_PROCS], got '$n'"
    [ -f "$DIR/nginx.pid" ] && die "already up (HALL_DIR=$DIR): run 'serve/hall.sh down' first"
    local ngx; ngx="$(nginx_bin)"
    mkdir -p "$DIR/tmp"
    # One cookie secret for every process (in the environment, not in `ps`): the XSRF cookie one process sets
    # is then valid on the others, so an upload still works for a visitor moved after a process died.
    local secret; secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    for ((i = 0; i < n; i++)); do
        port=$((APP_BASE + i))
        [ "$(health "$port")" = "000" ] || die "port $port is taken"
        # Each process listens on loopback only; nginx is the one door. Same flags as .streamlit/config.toml.
        # glibc's malloc: arrays of 4 MB and more get their own mapping, returned when freed. Without it, 30
        # students at the Tokens-per-step cap left one process at 2.3 GB; with it 1.05 GB (docs/serving.md).
        (cd "$ROOT" && STREAMLIT_SERVER_COOKIE_SECRET="$secret" MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-4194304}" \
            exec "$PYTHON" -m streamlit run app.py --server.address 127.0.0.1 --server.port "$port" \
            "${hosts[@]}" --server.headless true --browser.gatherUsageStats false > "$DIR/app-$port.log" 2>&1) &
        echo $! > "$DIR/app-$port.pid"
    done
    deadline=$((SECONDS + START_TIMEOUT_S))
    for ((i = 0; i < n; i++)); do
        port=$((APP_BASE + i))
        until [ "$(health "$port")" = "200" ]; do
            ((SECONDS < deadline)) || { down; die "process on port $port did not answer /_stcore/health"; }
            sleep 0.3
        done
    done
    write_conf "$n"
    "$ngx" -t -q -p "$DIR" -c "$DIR/nginx.conf" 2>"$DIR/nginx-test.log" || { down; die "nginx -t: $(cat "$DIR/nginx-test.log")"; }
    "$ngx" -p "$DIR" -c "$DIR/nginx.conf" -g 'daemon on;' 2>>"$DIR/nginx-error.log"
    until [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$ADDRESS:$PORT/_stcore/health" || true)" = "200" ]; do
        ((SECONDS < deadline)) || { down; die "nginx did not answer on $ADDRESS:$PORT"; }
        sleep 0.2
    done
    echo "$ADDRESS:$PORT" > "$DIR/listen"  # for status, whatever HALL_* it is called with
    echo "up: http://$ADDRESS:$PORT/ -> $n processes on 127.0.0.1:$APP_BASE..$((APP_BASE + n - 1)) (run files in $DIR)"
}

down() {
    local f pid
    if [ -f "$DIR/nginx.pid" ]; then
        pid="$(cat "$DIR/nginx.pid")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$DIR/nginx.pid"
    fi
    rm -f "$DIR/listen"
    for f in "$DIR"/app-*.pid; do
        [ -f "$f" ] || continue
        pid="$(cat "$f")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$f"
    done
    echo "down"
}

status() {
    local f port
    local listen="$ADDRESS:$PORT"
    [ -f "$DIR/listen" ] && listen="$(cat "$DIR/listen")"  # where up started it
    [ -f "$DIR/nginx.pid" ] && echo "nginx pid $(cat "$DIR/nginx.pid") on $listen" || echo "nginx: not running"
    for f in "$DIR"/app-*.pid; do
        [ -f "$f" ] || continue
        port="${f##*/app-}"; port="${port%.pid}"
        echo "app pid $(cat "$f") on 127.0.0.1:$port: health $(health "$port")"
    done
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) down ;;
    status) status ;;
    *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
