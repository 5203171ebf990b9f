SERVICES+=(rust)
# The Rust arrow-flight interop client (integration/rust), built once and
# cached: rebuilt only when its sources or lock file change. Needs cargo
# (rustup's, on the machine) and crates from the registry.
rust_up() {
	local src="$ROOT/integration/rust" target="$CACHE/cargo-target"
	local stamp="$target/.src-$(cat "$src/Cargo.toml" "$src/Cargo.lock" "$src"/src/*.rs | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		log "rust: building the arrow-flight interop client (first time: a few minutes)"
		CARGO_TARGET_DIR="$target" cargo build --quiet --release --locked --manifest-path "$src/Cargo.toml" >&2
		touch "$stamp"
	fi
	setenv FLIGHTLINE_RUST_CLIENT "$target/release/flightline-interop"
}
rust_down() { :; }
