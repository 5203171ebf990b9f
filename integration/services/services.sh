#!/usr/bin/env bash
# Starts and stops the real services Flightline's tests need, on a fresh
# Debian machine without Docker. Idempotent: `up` twice is `up` once.
#
#   services.sh up [svc...]   install (cached) and start services; all by default,
#                             all at once (each waits on its own readiness)
#   services.sh wait [svc...] finish what `up` left running in the background
#                             (the BigQuery emulator's build) and start it
#   services.sh restart svc.. stop and start the named services afresh
#   services.sh down [svc...] stop what `up` started, nothing else; the named
#                             services only, when any are named
#   services.sh env           print the environment the tests read
#
# Each service is one file svc/<name>.sh that appends <name> to SERVICES and
# defines <name>_up and <name>_down; adding a service is adding a file.
# `up` writes KEY=VALUE lines for the tests into $RUN/env; `make test` exports
# them. `up` runs the services' _up functions in parallel, the BigQuery
# emulator (whose first build is the longest thing of all) first; each
# one's output goes to $RUN/up/<name>.log and is printed when it is done.
# So the helpers below are safe to call concurrently: setenv, apt_install
# and free_port take a lock. Downloads are cached under $FLIGHTLINE_CACHE (default
# ~/.cache/flightline), state lives under integration/services/run/.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUN="$HERE/run"
CACHE="${FLIGHTLINE_CACHE:-$HOME/.cache/flightline}"
# READY_S bounds each service's wait for its port. A healthy service answers
# in seconds and the wait ends then; the bound is for a fresh machine, where
# every service installs and starts at once on two cores (load above 40):
# RabbitMQ's first start took 2 min there, past the 120 s it had.
READY_S="${FLIGHTLINE_SERVICE_READY_S:-300}"
SERVICES=()   # each svc/*.sh appends its name; sourced in file-name order
export HERE ROOT RUN CACHE READY_S
mkdir -p "$RUN" "$CACHE"

log() { printf '[services] %s\n' "$*" >&2; }

# setenv KEY VALUE records one variable for the tests (under a lock: the
# services start in parallel; the rename keeps a reader from seeing half a
# file). It writes $RUN/env, or the file SETENV_FILE names (a service's
# further instances keep their env apart: svc/bigquery.sh).
setenv() {
	local f="${SETENV_FILE:-$RUN/env}"
	(
		flock 8
		touch "$f"
		grep -v "^$1=" "$f" > "$f.tmp" || true
		printf '%s=%s\n' "$1" "$2" >> "$f.tmp"
		mv "$f.tmp" "$f"
	) 8>"$f.lock"
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on, and
# that no other free_port of this run handed out (services starting at
# the same time would otherwise be able to draw the same one).
free_port() {
	(
		flock 8
		local p
		for _ in $(seq 20); do
			p="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
			grep -qx "$p" "$RUN/ports" 2>/dev/null || break
		done
		echo "$p" >> "$RUN/ports"
		echo "$p"
	) 8>"$RUN/ports.lock"
}

# wait_port HOST PORT SECONDS waits until something accepts connections.
wait_port() {
	local deadline=$((SECONDS + $3))
	until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
		if ((SECONDS > deadline)); then log "timed out waiting for $1:$2"; return 1; fi
		sleep 0.2
	done
}

# apt_install PKG... installs Debian packages that are missing (one at a
# time: dpkg has one lock).
apt_install() {
	(
		flock 8
		local missing=()
		for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
		((${#missing[@]} == 0)) && exit 0
		log "apt-get install ${missing[*]}"
		if [ ! -f "$CACHE/.apt-updated" ] || [ -n "$(find "$CACHE/.apt-updated" -mmin +720)" ]; then
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && touch "$CACHE/.apt-updated"
		fi
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
	) 8>"$CACHE/apt.lock"
}

# retry CMD... runs a command that downloads (a go install, go get) up to 3
# times, 10 s apart: the Go module proxy sometimes ends a download early
# ("unexpected EOF": seen on a fresh machine with several go commands
# downloading at once), and go itself does not retry.
retry() {
	local i
	for i in 1 2 3; do
		"$@" && return 0
		if ((i < 3)); then log "failed ($i of 3), again in 10 s: $*"; sleep 10; fi
	done
	return 1
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

export -f log setenv free_port wait_port apt_install retry running stop_pid

for f in "$HERE"/svc/*.sh; do . "$f"; done

cmd="${1:-}"; shift || true
want=("$@"); ((${#want[@]})) || want=("${SERVICES[@]}")
case "$cmd" in
up)
	# All at once, the BigQuery emulator first (its up only starts its
	# build, or the emulator); each waits on its own readiness.
	order=()
	for s in "${want[@]}"; do
		if [ "$s" = bigquery ]; then order=("$s" "${order[@]}"); else order+=("$s"); fi
	done
	mkdir -p "$RUN/up"
	rm -f "$RUN/ports"
	declare -A upid=() started=()
	for s in "${order[@]}"; do
		# One service's up at a time per cache, across clones: two installs
		# into one cache directory at once corrupt it (two `npm install`s
		# of Azurite did, each deleting the other's files).
		# flock -o: the lock is the flock process's, so a server the up
		# starts in the background does not inherit it.
		flock -o "$CACHE/.up-$s.lock" "$HERE/services.sh" up1 "$s" >"$RUN/up/$s.log" 2>&1 < /dev/null &
		upid[$!]=$s; started[$s]=$SECONDS
		if [ "$s" = bigquery ]; then sleep 0.5; fi # its go build first
	done
	log "up: ${order[*]} (in parallel)"
	failed=()
	while ((${#upid[@]})); do
		rc=0; wait -n -p done "${!upid[@]}" || rc=$?
		s="${upid[$done]}"; unset "upid[$done]"
		sed "s/^/  /" "$RUN/up/$s.log" >&2
		if ((rc)); then
			failed+=("$s"); log "up: $s FAILED (exit $rc) after $((SECONDS - started[$s]))s; its log: $RUN/up/$s.log"
		else
			log "up: $s ready after $((SECONDS - started[$s]))s"
		fi
	done
	if ((${#failed[@]})); then log "up failed: ${failed[*]}"; exit 1; fi
	log "ready; test environment in $RUN/env"
	;;
up1) "${want[0]}_up" ;; # one service's up, under up's lock
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
	# The named services only, when any are named (all by default), all
	# at once, as up starts them: no service depends on another, and one
	# after another the JVMs' and brokers' shutdowns added up to 25 s of
	# every make test. A name was ignored before, and `down moto` stopped
	# every service of the clone.
	for s in "${want[@]}"; do
		declare -F "${s}_down" >/dev/null || { log "down: no service $s"; exit 2; }
	done
	for s in "${want[@]}"; do "${s}_down" & done
	wait
	;;
env) cat "$RUN/env" 2>/dev/null || true ;;
*) sed -n '2,15p' "$0"; exit 2 ;;
esac
