package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink/objsink"
)

// Config is what an sftp sink is given in its URL or YAML.
type Config struct {
	// Addr is the SSH server, host:port. Required.
	Addr string
	// User is the SSH user. Required.
	User string
	// Root is the directory on the server the part files go under; it
	// must exist. Required.
	Root string
	// KeyFile authenticates with the private key in this file, decrypted
	// with Passphrase when that is not empty. KeyFile or Password (or
	// both) is required.
	KeyFile, Passphrase string
	// Password authenticates with a password (the kind takes it only from
	// the environment).
	Password string
	// KnownHosts is the file the server's host key is checked against
	// (OpenSSH format). Default: ~/.ssh/known_hosts.
	KnownHosts string
	// InsecureIgnoreHostKey accepts any host key; New logs a warning.
	InsecureIgnoreHostKey bool
}

// Option configures New beyond its Config.
type Option func(*dialConfig)

type dialConfig struct {
	keyFile, passphrase string
	password            string
	knownHosts          string
	insecure            bool
	timeout             time.Duration
}

// Timeout bounds the TCP connect and the SSH handshake (default 30s).
func Timeout(d time.Duration) Option { return func(c *dialConfig) { c.timeout = d } }

// New connects to the SSH server at cfg.Addr as cfg.User at construction,
// starts the sftp subsystem and returns the Backend of cfg.Root, which
// dials again (with the same Config) at its next call after the connection
// is lost: a server restart or a cut connection fails the calls in flight
// with flightline.ErrUnavailable, and the coordinator's retry reaches a new
// connection. It validates cfg (a user, credentials, a readable key file
// and known_hosts). Errors of the first dial: no credentials or a bad key
// file → flightline.ErrInvalidInput; a host key not in known_hosts or
// refused credentials → flightline.ErrUnauthenticated; an unreachable
// server → flightline.ErrUnavailable; a server without the extensions →
// flightline.ErrFailedPrecondition (see NewOn). Secrets never appear in an
// error. Close releases the connection.
func New(ctx context.Context, cfg Config, opts ...Option) (*Redialing, error) {
	c := dialConfig{timeout: 30 * time.Second, keyFile: cfg.KeyFile, passphrase: cfg.Passphrase, password: cfg.Password,
		knownHosts: cfg.KnownHosts, insecure: cfg.InsecureIgnoreHostKey}
	for _, o := range opts {
		o(&c)
	}
	r := &Redialing{dial: func(ctx context.Context) (*Backend, error) { return dial(ctx, cfg.Addr, cfg.User, cfg.Root, c) }}
	if _, err := r.backend(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func dial(ctx context.Context, addr, user, root string, c dialConfig) (*Backend, error) {
	if user == "" {
		return nil, fmt.Errorf("%w: sftp sink: no user: write sftp://USER@HOST/PATH", flightline.ErrInvalidInput)
	}
	var auth []ssh.AuthMethod
	if c.keyFile != "" {
		pem, err := os.ReadFile(c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: sftp sink: key file: %v", flightline.ErrInvalidInput, err)
		}
		var signer ssh.Signer
		if c.passphrase != "" {
			signer, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(c.passphrase))
		} else {
			signer, err = ssh.ParsePrivateKey(pem)
		}
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("%w: sftp sink: key file %s is encrypted: set its passphrase in the environment", flightline.ErrInvalidInput, c.keyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: sftp sink: key file %s: %v", flightline.ErrInvalidInput, c.keyFile, err)
		}
		auth = append(auth, ssh.PublicKeys(signer))
	}
	if c.password != "" {
		auth = append(auth, ssh.Password(c.password))
	}
	if len(auth) == 0 {
		return nil, fmt.Errorf("%w: sftp sink: no credentials: give a key file, or a password in the environment", flightline.ErrInvalidInput)
	}
	var hostKey ssh.HostKeyCallback
	if c.insecure {
		slog.Warn("sftp sink: the server's host key is not checked (insecure_ignore_host_key=true): a man in the middle can read and change the data", "addr", addr)
		hostKey = ssh.InsecureIgnoreHostKey() //nolint:gosec // asked for, and warned about (at each dial)
	} else {
		file := c.knownHosts
		if file == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("%w: sftp sink: no known_hosts file given and no home directory: %v", flightline.ErrInvalidInput, err)
			}
			file = home + "/.ssh/known_hosts"
		}
		cb, err := knownhosts.New(file)
		if err != nil {
			return nil, fmt.Errorf("%w: sftp sink: known_hosts: %v (set known_hosts, or insecure_ignore_host_key=true)", flightline.ErrInvalidInput, err)
		}
		hostKey = cb
	}
	cfg := &ssh.ClientConfig{User: user, Auth: auth, HostKeyCallback: hostKey, Timeout: c.timeout}
	d := net.Dialer{Timeout: c.timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: sftp sink: connect to %s: %v", flightline.ErrUnavailable, addr, err)
	}
	sconn, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		var kerr *knownhosts.KeyError
		if errors.As(err, &kerr) {
			return nil, fmt.Errorf("%w: sftp sink: %s: the host key is not the one in known_hosts (or not there): %v", flightline.ErrUnauthenticated, addr, err)
		}
		return nil, fmt.Errorf("%w: sftp sink: ssh handshake with %s as %s: %v", flightline.ErrUnauthenticated, addr, user, err)
	}
	client := ssh.NewClient(sconn, chans, reqs)
	sc, err := sftp.NewClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%w: sftp sink: start the sftp subsystem on %s: %v", flightline.ErrUnavailable, addr, err)
	}
	b, err := NewOn(sc, root, client.Close)
	if err != nil {
		sc.Close()
		client.Close()
		return nil, err
	}
	return b, nil
}

// Redialing is the Backend New returns: a Backend on one SSH connection,
// replaced by a new one at the first call after the connection ended.
// Safe for concurrent use.
type Redialing struct {
	dial func(context.Context) (*Backend, error)

	mu   sync.Mutex
	cur  *Backend
	dead chan struct{} // closed when cur's connection has ended
	done bool          // closed by Close
}

// backend returns the live Backend, dialling when there is none.
func (r *Redialing) backend(ctx context.Context) (*Backend, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil, fmt.Errorf("%w: sftp sink: closed", flightline.ErrUnavailable)
	}
	if r.cur != nil {
		select {
		case <-r.dead:
			slog.Warn("sftp sink: the connection was lost; dialling again", "root", r.cur.root)
			_ = r.cur.Close()
			r.cur = nil
		default:
			return r.cur, nil
		}
	}
	b, err := r.dial(ctx)
	if err != nil {
		return nil, err
	}
	dead := make(chan struct{})
	go func() { _ = b.c.Wait(); close(dead) }()
	r.cur, r.dead = b, dead
	return b, nil
}

// lost drops b when err says its connection was lost (before the
// connection's end is noticed otherwise), so the next call dials; it
// returns err. A call in flight when the connection ends gets
// sftp.ErrSSHFxConnectionLost; one that starts after it, before the
// connection's reader has noticed, fails to send its packet (io.EOF in
// the chain: pkg/sftp's "failed to send packet: EOF").
func (r *Redialing) lost(b *Backend, err error) error {
	if err == nil || !(errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == b {
		slog.Warn("sftp sink: the connection was lost; dialling again at the next call", "root", b.root, "error", err)
		_ = b.Close()
		r.cur = nil
	}
	return err
}

// Root is the directory on the server.
func (r *Redialing) Root() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return ""
	}
	return r.cur.root
}

// Close releases the connection; later calls fail.
func (r *Redialing) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.cur = nil
	return err
}

// Put implements objsink.Backend.
func (r *Redialing) Put(ctx context.Context, key string, data []byte) error {
	b, err := r.backend(ctx)
	if err != nil {
		return err
	}
	return r.lost(b, b.Put(ctx, key, data))
}

// PutIfAbsent implements objsink.Backend.
func (r *Redialing) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	b, err := r.backend(ctx)
	if err != nil {
		return err
	}
	return r.lost(b, b.PutIfAbsent(ctx, key, data))
}

// Publish implements objsink.Backend.
func (r *Redialing) Publish(ctx context.Context, from, to string) error {
	b, err := r.backend(ctx)
	if err != nil {
		return err
	}
	return r.lost(b, b.Publish(ctx, from, to))
}

// Get implements objsink.Backend.
func (r *Redialing) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := r.backend(ctx)
	if err != nil {
		return nil, err
	}
	data, err := b.Get(ctx, key)
	return data, r.lost(b, err)
}

// Exists implements objsink.Backend.
func (r *Redialing) Exists(ctx context.Context, key string) (bool, error) {
	b, err := r.backend(ctx)
	if err != nil {
		return false, err
	}
	ok, err := b.Exists(ctx, key)
	return ok, r.lost(b, err)
}

// List implements objsink.Backend.
func (r *Redialing) List(ctx context.Context, dir string) ([]objsink.Object, error) {
	b, err := r.backend(ctx)
	if err != nil {
		return nil, err
	}
	objs, err := b.List(ctx, dir)
	return objs, r.lost(b, err)
}

// Delete implements objsink.Backend.
func (r *Redialing) Delete(ctx context.Context, key string) error {
	b, err := r.backend(ctx)
	if err != nil {
		return err
	}
	return r.lost(b, b.Delete(ctx, key))
}

var _ objsink.Backend = (*Redialing)(nil)
