SERVICES+=(chromium)
# Chromium from Debian's packages, for the test that renders the status
# page (`flightline sync --metrics-addr … /status`) in a real headless
# browser. Nothing runs: the test starts the browser per page.
chromium_up() {
	apt_install chromium
	local bin
	bin="$(command -v chromium || true)"
	[ -n "$bin" ] || { log "chromium: not found after installing chromium"; return 1; }
	setenv FLIGHTLINE_CHROMIUM "$bin"
	log "chromium: $("$bin" --version 2>/dev/null | head -n1)"
}
chromium_down() { :; }
