SERVICES+=(rabbitmq)
# rabbitmq: RabbitMQ (Debian rabbitmq-server, AMQP 0-9-1) for the amqp: sink,
# and its stream protocol (the rabbitmq_stream plugin) for the
# rabbitmq-stream: sink.
# apt-installed once (about 25 s; the postinst starts nothing: there is no
# systemd). Run as the current user, bypassing /usr/sbin/rabbitmq-server
# (which su's to the rabbitmq user), with its own HOME (Erlang cookie),
# mnesia, log, config and plugin files under $RUN/rabbitmq. Every port is
# chosen freely and bound to 127.0.0.1: AMQP, Erlang distribution and the
# epmd it starts (its own, on its own port, so `down` can stop exactly that
# epmd: epmd outlives the broker). No plugins (management off). Account:
# the default guest/guest, which RabbitMQ allows from loopback only. `up`
# is idempotent; `down` stops only the broker and epmd this script started.
RABBITMQ_BIN=/usr/lib/rabbitmq/bin

rabbitmq_env() {
	local dir="$RUN/rabbitmq"
	export HOME="$dir/home" RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
		RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
		RABBITMQ_NODENAME=rabbit@localhost ERL_EPMD_ADDRESS=127.0.0.1 \
		ERL_EPMD_PORT="$(cat "$dir/epmd_port")" RABBITMQ_DIST_PORT="$(cat "$dir/dist_port")"
}

rabbitmq_up() {
	local dir="$RUN/rabbitmq" port
	[ -x "$RABBITMQ_BIN/rabbitmq-server" ] || apt_install rabbitmq-server
	mkdir -p "$dir/home" "$dir/mnesia" "$dir/log"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "rabbitmq: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		free_port > "$dir/epmd_port"
		free_port > "$dir/dist_port"
		free_port > "$dir/stream_port"
		printf '[rabbitmq_stream].\n' > "$dir/enabled_plugins"
		cat > "$dir/rabbitmq.conf" <<-CONF
			listeners.tcp.1 = 127.0.0.1:$port
			stream.listeners.tcp.1 = 127.0.0.1:$(cat "$dir/stream_port")
			stream.advertised_host = 127.0.0.1
			stream.advertised_port = $(cat "$dir/stream_port")
			distribution.listener.interface = 127.0.0.1
			distribution.listener.port_range.min = $(cat "$dir/dist_port")
			distribution.listener.port_range.max = $(cat "$dir/dist_port")
		CONF
		(
			rabbitmq_env
			nohup "$RABBITMQ_BIN/rabbitmq-server" >"$dir/server.log" 2>&1 &
			echo $! > "$dir/pid"
		)
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 30 "$dir/server.log" >&2; return 1; }
		wait_port 127.0.0.1 "$(cat "$dir/stream_port")" "$READY_S" || { tail -n 30 "$dir/server.log" >&2; return 1; }
		(rabbitmq_env; "$RABBITMQ_BIN/rabbitmqctl" await_startup >/dev/null) ||
			{ tail -n 30 "$dir/server.log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_AMQP_URL "amqp://guest:guest@127.0.0.1:$port/"
	# A broker started before the stream listener was added has none.
	if [ -f "$dir/stream_port" ]; then
		setenv FLIGHTLINE_RABBITMQ_STREAM_URL "rabbitmq-stream://guest:guest@127.0.0.1:$(cat "$dir/stream_port")/"
	fi
}

rabbitmq_down() {
	local dir="$RUN/rabbitmq"
	[ -f "$dir/epmd_port" ] || return 0
	if running "$dir/pid"; then
		(rabbitmq_env; "$RABBITMQ_BIN/rabbitmqctl" stop >/dev/null 2>&1) || true
		stop_pid "$dir/pid"
	fi
	(rabbitmq_env; epmd -port "$ERL_EPMD_PORT" -kill >/dev/null 2>&1) || true
}
