// Package config is Flightline's config model: the config file
// (flightline.yml) and the endpoint specs the commands take, turned into
// the library's sources, sinks, transforms and pipelines.
//
// An endpoint spec is a Flight URL (grpc://HOST:PORT, grpc+tls://HOST:PORT)
// for a remote endpoint, or kind:LOCATION?KEY=VALUE&… for one that runs in
// this process (OpenSource, OpenSink). The config file names the same
// kinds as YAML mappings, ${VAR} expanded, secrets masked when shown
// (Load, File.Show), and the pipelines between them (File.NewSync,
// File.Listeners, File.Check, File.Query). Unknown kinds and unknown keys
// are errors, never ignored.
//
// # Kinds
//
// Each kind is one file of this package that registers itself in its
// init function: a config struct whose fields carry spec tags
// (internal/spec), a constructor from that struct to a connector's
// options, and nothing else. From that one registration come the URL
// parser, the YAML keys, `flightline kinds`, the key reference
// (Reference, docs/config.md), the machine-readable schema (WriteSchema,
// the Python package's typed classes) and the edits of `flightline
// connect` (EditKind, Apply). Adding a kind touches its connector's
// package and one file here.
//
// # Pitfalls
//
// The package keeps process-wide state in two places, both set by the
// command before it opens anything: the kind registry (filled by init
// functions, read-only after) and the Go runtime's memory limit
// (SetMemoryLimit), which the Kafka source kinds raise by their buffers as
// they open. Check never opens a pipeline (Open would fence a running
// one); it only asks read-only questions.
package config
