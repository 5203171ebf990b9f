#!/usr/bin/env bash
# Starts and stops the real services Flightline's tests need, on a fresh
# Debian machine without Docker. Idempotent: `up` twice is `up` once.
#
#   services.sh up [svc...]   install (cached) and start services; all by default
#   services.sh wait [svc...] finish what `up` left running in the background
#                             (the BigQuery emulator's build) and start it
#   services.sh restart svc.. stop and start the named services afresh
#   services.sh down          stop what `up` started, nothing else
#   services.sh env           print the environment the tests read
#
# Each service is one file svc/<name>.sh that appends <name> to SERVICES and
# defines <name>_up and <name>_down; adding a service is adding a file.
# `up` writes KEY=VALUE lines for the tests into $RUN/env; `make test` exports
# them. Downloads are cached under $FLIGHTLINE_CACHE (default
# ~/.cache/flightline), state lives under integration/services/run/.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUN="$HERE/run"
CACHE="${FLIGHTLINE_CACHE:-$HOME/.cache/flightline}"
SERVICES=()   # each svc/*.sh appends its name; sourced in file-name order
export HERE ROOT RUN CACHE
mkdir -p "$RUN" "$CACHE"

log() { printf '[services] %s\n' "$*" >&2; }

# setenv KEY VALUE records one variable for the tests.
setenv() {
	touch "$RUN/env"
	grep -v "^$1=" "$RUN/env" > "$RUN/env.tmp" || true
	printf '%s=%s\n' "$1" "$2" >> "$RUN/env.tmp"
	mv "$RUN/env.tmp" "$RUN/env"
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port HOST PORT SECONDS waits until something accepts connections.
wait_port() {
	local deadline=$((SECONDS + $3))
	until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
		if ((SECONDS > deadline)); then log "timed out waiting for $1:$2"; return 1; fi
		sleep 0.2
	done
}

# apt_install PKG... installs Debian packages that are missing.
apt_install() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	((${#missing[@]} == 0)) && return 0
	log "apt-get install ${missing[*]}"
	if [ ! -f "$CACHE/.apt-updated" ] || [ -n "$(find "$CACHE/.apt-updated" -mmin +720)" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && touch "$CACHE/.apt-updated"
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# running PIDFILE reports whether the process in PIDFILE is alive.
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pid PIDFILE stops the process we started, politely then firmly.
stop_pid() {
	running "$1" || { rm -f "$1"; return 0; }
	local pid; pid="$(cat "$1")"
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$1"
}

export -f log setenv free_port wait_port apt_install running stop_pid

for f in "$HERE"/svc/*.sh; do . "$f"; done

cmd="${1:-}"; shift || true
want=("$@"); ((${#want[@]})) || want=("${SERVICES[@]}")
case "$cmd" in
up)
	for s in "${want[@]}"; do log "up: $s"; "${s}_up"; done
	log "ready; test environment in $RUN/env"
	;;
wait)
	for s in "${want[@]}"; do
		if declare -F "${s}_wait" >/dev/null; then log "wait: $s"; "${s}_wait"; fi
	done
	log "ready; test environment in $RUN/env"
	;;
restart)
	# Stops and starts the named services (state and ports are new).
	for s in "${want[@]}"; do
		log "restart: $s"; "${s}_down" || true
		if declare -F "${s}_wait" >/dev/null; then "${s}_wait"; else "${s}_up"; fi
	done
	log "ready; test environment in $RUN/env"
	;;
down)
	for ((i=${#SERVICES[@]}-1; i>=0; i--)); do "${SERVICES[i]}_down" || true; done
	;;
env) cat "$RUN/env" 2>/dev/null || true ;;
*) sed -n '2,15p' "$0"; exit 2 ;;
esac
