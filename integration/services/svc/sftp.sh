SERVICES+=(sftp)
# OpenSSH's sftp-server from Debian, for the sftp sink's tests: the unit
# tests run it over stdio (no sshd, no port; FLIGHTLINE_SFTP_SERVER), the
# integration and kill tests reach it through a real sshd on 127.0.0.1 on
# a free port, with a host key, a user key, authorized_keys and a
# known_hosts file generated under $RUN/sftp (FLIGHTLINE_SFTP_ADDR,
# _USER, _KEY, _KNOWN_HOSTS). The user is the one running the services;
# sshd runs with UsePAM no and StrictModes no, and needs /run/sshd (its
# privilege separation directory), created when missing. `up` is
# idempotent; `down` stops only the sshd this script started.
sftp_up() {
	local dir="$RUN/sftp" port user
	[ -x /usr/lib/openssh/sftp-server ] || apt_install openssh-sftp-server
	[ -x /usr/sbin/sshd ] || apt_install openssh-server
	command -v sftp >/dev/null || apt_install openssh-client
	setenv FLIGHTLINE_SFTP_SERVER /usr/lib/openssh/sftp-server
	user="$(id -un)"
	mkdir -p "$dir" /run/sshd
	[ -f "$dir/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C flightline-test-host -f "$dir/host_ed25519"
	[ -f "$dir/user_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C flightline-test-user -f "$dir/user_ed25519"
	cp "$dir/user_ed25519.pub" "$dir/authorized_keys"
	chmod 600 "$dir/authorized_keys"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "sftp: sshd already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		cat > "$dir/sshd_config" <<-EOF
			ListenAddress 127.0.0.1:$port
			HostKey $dir/host_ed25519
			AuthorizedKeysFile $dir/authorized_keys
			PidFile $dir/sshd.pid
			UsePAM no
			StrictModes no
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			PubkeyAuthentication yes
			PermitRootLogin prohibit-password
			AllowUsers $user
			MaxStartups 100:30:200
			MaxSessions 50
			LogLevel ERROR
			Subsystem sftp /usr/lib/openssh/sftp-server
		EOF
		nohup /usr/sbin/sshd -D -e -f "$dir/sshd_config" >"$dir/log" 2>&1 &
		echo $! > "$dir/pid"
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$dir/host_ed25519.pub")" > "$dir/known_hosts"
	setenv FLIGHTLINE_SFTP_ADDR "127.0.0.1:$port"
	setenv FLIGHTLINE_SFTP_USER "$user"
	setenv FLIGHTLINE_SFTP_KEY "$dir/user_ed25519"
	setenv FLIGHTLINE_SFTP_KNOWN_HOSTS "$dir/known_hosts"
}
sftp_down() { stop_pid "$RUN/sftp/pid"; }
