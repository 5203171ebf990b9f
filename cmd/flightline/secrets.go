package main

// Secrets fail closed (config/secrets.go): a security flag given an empty
// value is an error, not a flag left out.

import (
	"flag"
	"fmt"
	"strings"

	"github.com/flightline/flightline/config"
)

// securityFlag reports whether a flag names a token or TLS file: one that,
// given an empty value (an unset shell variable), would turn security off.
func securityFlag(name string) bool {
	return strings.HasSuffix(name, "token-file") || strings.Contains(name, "tls-")
}

// checkEmptyFlags refuses security flags given an empty value.
func checkEmptyFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && securityFlag(f.Name) && strings.TrimSpace(f.Value.String()) == "" {
			err = fmt.Errorf("%w: --%s was given an empty value (an unset variable?): give a file, or leave the flag out", config.ErrEmptySecret, f.Name)
		}
	})
	return err
}
