package config

// Secrets fail closed. An empty token would turn authentication off (the
// server) or send no credentials (a client); an empty TLS file name would
// turn TLS off. Each is an error at start that names where the empty value
// came from: a flag, a file, an environment variable or a key of the
// config file. Serving without authentication is an explicit choice on
// any address but loopback (--insecure-no-auth) and a warning on every
// start.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
)

// ErrEmptySecret marks an empty token or TLS setting.
var ErrEmptySecret = errors.New("empty secret")

// ReadToken returns the token in file (what names the flag or key that
// gave it), or else the value of the environment variable env ("" for
// none). A file, or a set variable, that holds nothing but white space is
// an error naming it: an empty token would turn authentication off.
func ReadToken(what, file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("%w: %s %s is empty: write the token into it (an empty token would turn authentication off)", ErrEmptySecret, what, file)
		}
		return tok, nil
	}
	if env == "" {
		return "", nil
	}
	v, ok := os.LookupEnv(env)
	if ok && strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%w: the environment variable %s is set but empty: give it the token, or unset it (an empty token would turn authentication off)", ErrEmptySecret, env)
	}
	return v, nil
}

// CheckTLSFiles refuses TLS files that are empty, naming the flag or key.
func CheckTLSFiles(files ...[2]string) error {
	for _, f := range files {
		what, path := f[0], f[1]
		if path == "" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the TLS loader reports it, naming the file
		}
		if strings.TrimSpace(string(b)) == "" {
			return fmt.Errorf("%w: %s %s is empty: it must hold PEM data", ErrEmptySecret, what, path)
		}
	}
	return nil
}

// securityKeys are the config file's keys whose empty value would turn
// authentication or TLS off.
var securityKeys = map[string]bool{"token": true, "token_file": true, "tls_cert": true, "tls_key": true, "tls_ca": true, "tls_client_ca": true}

// isLoopback reports whether addr (HOST:PORT) listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AuthDecision checks that an endpoint at addr without authentication
// (no token, no client CA) is served only by explicit choice: with
// noAuth, or on loopback. Either way a warning says so on every start.
// A token or client CA together with noAuth is a contradiction.
func AuthDecision(log *slog.Logger, addr string, authed, noAuth bool) error {
	switch {
	case authed && noAuth:
		return errors.New("--insecure-no-auth together with a token or a client CA: choose one")
	case authed:
		return nil
	case noAuth:
		log.Warn("serving WITHOUT authentication (--insecure-no-auth): anyone who can reach this address can read or write through it", "addr", addr)
		return nil
	case isLoopback(addr):
		log.Warn("serving without authentication on loopback: any local process can call it; set --token-file (or FLIGHTLINE_TOKEN) or --tls-client-ca", "addr", addr)
		return nil
	}
	return fmt.Errorf("refusing to serve %s without authentication: set --token-file (or FLIGHTLINE_TOKEN) or mTLS (--tls-client-ca), or pass --insecure-no-auth to serve it open on purpose", addr)
}
