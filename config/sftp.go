package config

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/sftp"
	"github.com/flightline/flightline/internal/spec"
)

// sftpSinkConfig is the sftp:// sink kind. The password and the key's
// passphrase are taken only from the environment, never from the URL or
// the file.
type sftpSinkConfig struct {
	objLayout
	KeyFile               string `spec:"key_file" doc:"the private key to log in with (its passphrase from $FLIGHTLINE_SFTP_PASSPHRASE); a password is taken only from $FLIGHTLINE_SFTP_PASSWORD"`
	KnownHosts            string `spec:"known_hosts" doc:"the OpenSSH known_hosts file the server's host key is checked against; default: ~/.ssh/known_hosts"`
	InsecureIgnoreHostKey bool   `spec:"insecure_ignore_host_key" doc:"accept any host key (logged as a warning); for tests only"`
}

var sftpSpec = spec.New[sftpSinkConfig]("sftp", "sftp://USER@HOST[:PORT]/PATH?key_file=…&format=parquet|jsonl|csv",
	"exactly-once part files under PATH/<target>/ on an OpenSSH-compatible server, committed by hardlink@openssh.com after fsync@openssh.com; refused on a server without them", nil)

func init() {
	sinkKinds["sftp"] = sinkOf(sftpSpec, openSFTP).at("path", "USER@HOST[:PORT]/PATH, the existing directory the files go under")
}

func openSFTP(e env, u *url.URL, c sftpSinkConfig) (flightsink.Sink, func(), error) {
	if u.Host == "" || u.User == nil || u.User.Username() == "" || location(u) == "" {
		return nil, nil, fmt.Errorf("sftp: want sftp://USER@HOST[:PORT]/PATH, e.g. sftp://drop@files.example.com/incoming")
	}
	if _, ok := u.User.Password(); ok {
		return nil, nil, fmt.Errorf("sftp: no password in the URL: set FLIGHTLINE_SFTP_PASSWORD in the environment")
	}
	cfg, err := c.layout()
	if err != nil {
		return nil, nil, fmt.Errorf("sftp: %w", err)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "22")
	}
	scfg := sftp.Config{Addr: addr, User: u.User.Username(), Root: location(u), KnownHosts: c.KnownHosts,
		InsecureIgnoreHostKey: c.InsecureIgnoreHostKey, Password: os.Getenv("FLIGHTLINE_SFTP_PASSWORD")}
	if c.KeyFile != "" {
		scfg.KeyFile, scfg.Passphrase = c.KeyFile, os.Getenv("FLIGHTLINE_SFTP_PASSPHRASE")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := sftp.New(ctx, scfg)
	if err != nil {
		return nil, nil, err
	}
	cfg.Backend, cfg.Name = b, "sftp sink"
	s, err := objsink.New(e.ctx, cfg)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return objSink{Sink: s, how: "hardlink@openssh.com commit records after fsync@openssh.com"}, func() { b.Close() }, nil
}
