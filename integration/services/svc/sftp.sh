SERVICES+=(sftp)
# OpenSSH's sftp-server from Debian, for the sftp sink's tests, which run it
# over stdio (no sshd, no port). Nothing runs: `up` installs the package
# when missing and records FLIGHTLINE_SFTP_SERVER.
sftp_up() {
	[ -x /usr/lib/openssh/sftp-server ] || apt_install openssh-sftp-server
	setenv FLIGHTLINE_SFTP_SERVER /usr/lib/openssh/sftp-server
}
sftp_down() { :; }
