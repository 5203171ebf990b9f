// Package snowconn connects Flightline's Snowflake sink and source to a
// Snowflake account through gosnowflake: one Config for both, the
// authenticators they support, timeouts and retries set deliberately, and
// the classification of Snowflake's errors into flightline's sentinels.
//
// Secrets (password, OAuth token, private key and its passphrase) are
// never formatted into an error or a log line: errors name the account,
// user, database, schema, warehouse and role only, and driver messages are
// passed through Redact first.
//
// gosnowflake's defaults retry a failing HTTP request for about a minute
// (MaxRetryCount 7, LoginTimeout and RequestTimeout 300 s on some paths).
// Config.Timeout bounds the whole of one login or request instead: the
// driver's LoginTimeout, RequestTimeout, ClientTimeout and JWTClientTimeout
// are all set from it, and MaxRetryCount from Config.Retries, so a dead
// endpoint fails within about Timeout. Callers add their own retry with
// backoff around whole operations (see Retry).
package snowconn

import (
	"context"

	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/flightline/flightline"
)

// Auth is how the connector authenticates.
type Auth string

const (
	// AuthPassword is user and password.
	AuthPassword Auth = "password"
	// AuthKeyPair is key-pair authentication: a JWT signed with an RSA
	// private key (PKCS#8 or PKCS#1 PEM, encrypted PKCS#8 with a passphrase).
	AuthKeyPair Auth = "keypair"
	// AuthOAuth is an OAuth access token obtained elsewhere.
	AuthOAuth Auth = "oauth"
)

// Config is where and how to connect. Account, User and Database are
// required; Auth is inferred when empty: OAuth when Token is set, key pair
// when PrivateKeyFile or PrivateKey is, else password.
type Config struct {
	Account   string // account identifier (orgname-account or locator[.region])
	User      string
	Database  string
	Schema    string // default PUBLIC
	Warehouse string // required to COPY or query; a missing one is named in the error
	Role      string

	Auth           Auth
	Password       string // AuthPassword
	PrivateKeyFile string // AuthKeyPair: path of a PEM file
	PrivateKey     []byte // AuthKeyPair: the PEM itself (instead of the file)
	Passphrase     string // AuthKeyPair: for an encrypted PKCS#8 key
	Token          string // AuthOAuth

	// Host, Port and Protocol override the endpoint derived from the
	// account (a private link, or an emulator: Protocol "http").
	Host     string
	Port     int
	Protocol string

	// Timeout bounds one login or one request including the driver's own
	// retries (default 60 s). Retries is the driver's retry count per
	// request (default 2).
	Timeout time.Duration
	Retries int

	// LockTimeout is the session's LOCK_TIMEOUT: how long a statement waits
	// for a lock held by another transaction (default 60 s; Snowflake's own
	// default is 12 hours).
	LockTimeout time.Duration

	// Application is reported to Snowflake (default "flightline").
	Application string

	// Transport, when set, carries every HTTP request of the driver
	// instead of its own transport (tests use it to delay or observe
	// requests). Nil keeps the driver's.
	Transport http.RoundTripper
}

// Describe names the connection for errors and logs, without secrets.
func (c *Config) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s/%s", c.User, c.Account, c.Database)
	if c.Schema != "" {
		b.WriteString("." + c.Schema)
	}
	if c.Warehouse != "" {
		b.WriteString(" warehouse " + c.Warehouse)
	}
	if c.Role != "" {
		b.WriteString(" role " + c.Role)
	}
	return b.String()
}

// secrets returns the values Redact removes.
func (c *Config) secrets() []string {
	var out []string
	for _, s := range []string{c.Password, c.Token, c.Passphrase, string(c.PrivateKey)} {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	return out
}

// Redact removes every secret of c from s.
func (c *Config) Redact(s string) string {
	for _, x := range c.secrets() {
		s = strings.ReplaceAll(s, x, "[REDACTED]")
	}
	return s
}

// Validate checks c and fills in defaults. It reads the private key file.
func (c *Config) validate() (*sf.Config, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: snowflake: "+f, append([]any{flightline.ErrInvalidInput}, a...)...)
	}
	if c.Account == "" {
		return nil, bad("account is required")
	}
	if c.User == "" {
		return nil, bad("user is required")
	}
	if c.Database == "" {
		return nil, bad("database is required")
	}
	if c.Schema == "" {
		c.Schema = "PUBLIC"
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	if c.Retries <= 0 {
		c.Retries = 2
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = 60 * time.Second
	}
	if c.Application == "" {
		c.Application = "flightline"
	}
	if c.Auth == "" {
		switch {
		case c.Token != "":
			c.Auth = AuthOAuth
		case c.PrivateKeyFile != "" || len(c.PrivateKey) > 0:
			c.Auth = AuthKeyPair
		default:
			c.Auth = AuthPassword
		}
	}
	lock := fmt.Sprint(int(c.LockTimeout.Seconds()))
	cfg := &sf.Config{
		Account: c.Account, User: c.User, Database: c.Database, Schema: c.Schema,
		Warehouse: c.Warehouse, Role: c.Role,
		Host: c.Host, Port: c.Port, Protocol: c.Protocol,
		LoginTimeout: c.Timeout, RequestTimeout: c.Timeout, ClientTimeout: c.Timeout,
		JWTClientTimeout: c.Timeout, CloudStorageTimeout: c.Timeout,
		MaxRetryCount:    c.Retries,
		Application:      c.Application,
		DisableTelemetry: true,
		// Validated at login: a missing database, schema, warehouse or role
		// fails the login with an error naming it (390201, 390189).
		ValidateDefaultParameters:      sf.ConfigBoolTrue,
		ClientStoreTemporaryCredential: sf.ConfigBoolFalse,
		Params:                         map[string]*string{"LOCK_TIMEOUT": &lock},
		Transporter:                    c.Transport,
	}
	switch c.Auth {
	case AuthPassword:
		if c.Password == "" {
			return nil, bad("password authentication without a password")
		}
		cfg.Authenticator, cfg.Password = sf.AuthTypeSnowflake, c.Password
	case AuthKeyPair:
		pem := c.PrivateKey
		if len(pem) == 0 {
			if c.PrivateKeyFile == "" {
				return nil, bad("key-pair authentication without a private key")
			}
			var err error
			if pem, err = os.ReadFile(c.PrivateKeyFile); err != nil {
				return nil, bad("read private key file %s: %v", c.PrivateKeyFile, errors.Unwrap(err))
			}
		}
		key, err := ParsePrivateKey(pem, []byte(c.Passphrase))
		if err != nil {
			return nil, err
		}
		cfg.Authenticator, cfg.PrivateKey = sf.AuthTypeJwt, key
	case AuthOAuth:
		if c.Token == "" {
			return nil, bad("OAuth authentication without a token")
		}
		cfg.Authenticator, cfg.Token = sf.AuthTypeOAuth, c.Token
	default:
		return nil, bad("unknown authentication %q (want password, keypair or oauth)", c.Auth)
	}
	if c.Host != "" && c.Protocol == "" {
		cfg.Protocol = "https"
	}
	return cfg, nil
}

// Open returns a database/sql handle on the account. It does not connect:
// the first statement does (see Ping). The caller closes it.
func Open(c *Config) (*sql.DB, error) {
	cfg, err := c.validate()
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector{sf.NewConnector(sf.SnowflakeDriver{}, *cfg)}), nil
}

// Ping connects, authenticates, and checks that the session has a current
// database and schema (the login validates them, and the warehouse, on
// Snowflake; an emulator may not), naming whichever is missing. A missing
// warehouse surfaces on the first COPY or query (000606), named too.
func Ping(ctx context.Context, db *sql.DB, c *Config) error {
	var d, s sql.NullString
	err := db.QueryRowContext(ctx, `SELECT CURRENT_DATABASE(), CURRENT_SCHEMA()`).Scan(&d, &s)
	if err != nil {
		return c.Wrap(err, "snowflake %s: connect", c.Describe())
	}
	switch {
	case !d.Valid || d.String == "":
		return fmt.Errorf("%w: snowflake %s: database %q does not exist or is not authorized", flightline.ErrNotFound, c.Describe(), c.Database)
	case !s.Valid || s.String == "":
		return fmt.Errorf("%w: snowflake %s: schema %q does not exist or is not authorized", flightline.ErrNotFound, c.Describe(), c.Schema)
	}
	return nil
}

// Snowflake error numbers the classification uses.
const (
	errIncorrectCredentials = 390100 // incorrect username or password
	errUserLocked           = 390102
	errJWTInvalid           = 390144
	errOAuthInvalid         = 390303
	errOAuthExpired         = 390318
	errPATInvalid           = 394300
	errObjectNotExist       = 390201 // database/schema/warehouse at login
	errRoleNotExist         = 390189
	errNoWarehouse          = 606  // No active warehouse selected
	errObjectMissing        = 2003 // object does not exist or not authorized
	errObjectMissing2       = 2043
	errInsufficientPriv     = 3001
	errSessionClosed        = 390111 // session no longer exists (closed)
	errSessionGone          = 390112 // session no longer exists
	errSessionExpired       = 390114 // authentication token has expired
	errLockTimeout          = 625    // statement waited too long for a lock
	errTxnConflict          = 627    // transaction aborted (conflict / deadlock)
)

// Wrap classifies err into flightline's sentinels and wraps it with the
// formatted context, with every secret of c removed. nil stays nil.
//
//   - wrong credentials (user, password, key, token) → ErrUnauthenticated
//   - a missing database, schema, warehouse or role → ErrNotFound, with the
//     name
//   - insufficient privileges → ErrPermissionDenied
//   - network failures, timeouts, 5xx, lost sessions → ErrUnavailable
//   - lock timeouts and aborted transactions → ErrConflict
//   - SQL compilation and data errors → ErrInvalidInput
//   - a cancelled context stays context.Canceled
func (c *Config) Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	kind, detail := c.classify(err)
	cause := c.Redact(err.Error())
	if detail != "" {
		cause = detail + ": " + cause
	}
	if kind == nil {
		return fmt.Errorf("%s: %s", msg, cause)
	}
	return &Error{kind: kind, msg: msg + ": " + cause, err: err}
}

// Error is a classified Snowflake error. Its message has no secrets; the
// driver error it wraps is reachable through Unwrap only for errors.As
// (gosnowflake's error carries the query id and SQLSTATE).
type Error struct {
	kind error
	msg  string
	err  error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinel and the driver error.
func (e *Error) Unwrap() []error { return []error{e.kind, e.err} }

func (c *Config) classify(err error) (kind error, detail string) {
	if errors.Is(err, context.Canceled) {
		return context.Canceled, ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return flightline.ErrUnavailable, fmt.Sprintf("no answer within the deadline (timeout %s)", c.Timeout)
	}
	var se *sf.SnowflakeError
	if errors.As(err, &se) {
		switch se.Number {
		case errIncorrectCredentials, errUserLocked, errJWTInvalid, errOAuthInvalid, errOAuthExpired, errPATInvalid:
			return flightline.ErrUnauthenticated, fmt.Sprintf("authentication of user %q (%s) refused", c.User, c.Auth)
		case errObjectNotExist:
			return flightline.ErrNotFound, c.missingNamed(se.Message)
		case errRoleNotExist:
			return flightline.ErrNotFound, fmt.Sprintf("role %q does not exist or is not granted to %q", c.Role, c.User)
		case errNoWarehouse:
			if c.Warehouse == "" {
				return flightline.ErrNotFound, "no warehouse configured (set warehouse)"
			}
			return flightline.ErrNotFound, fmt.Sprintf("warehouse %q does not exist, is suspended without auto-resume, or is not granted", c.Warehouse)
		case errObjectMissing, errObjectMissing2:
			return flightline.ErrNotFound, ""
		case errInsufficientPriv:
			return flightline.ErrPermissionDenied, ""
		case errSessionClosed, errSessionGone, errSessionExpired, sf.ErrCodeServiceUnavailable, sf.ErrCodeFailedToConnect:
			return flightline.ErrUnavailable, ""
		case errLockTimeout, errTxnConflict:
			return flightline.ErrConflict, ""
		}
		if strings.HasPrefix(se.SQLState, "08") { // connection exceptions
			return flightline.ErrUnavailable, ""
		}
		if strings.HasPrefix(se.SQLState, "42") || strings.HasPrefix(se.SQLState, "22") {
			return flightline.ErrInvalidInput, ""
		}
		if se.Number >= 260000 && se.Number < 270000 { // driver-side: HTTP, connection
			return flightline.ErrUnavailable, ""
		}
		return nil, ""
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return flightline.ErrUnavailable, ""
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return flightline.ErrUnavailable, ""
	}
	s := err.Error()
	for _, m := range []string{"connection refused", "connection reset", "EOF", "timeout", "no such host", "503", "502", "504"} {
		if strings.Contains(s, m) {
			return flightline.ErrUnavailable, ""
		}
	}
	return nil, ""
}

// SessionLost reports whether err says that the session of the connection
// that ran the statement is gone for good: closed or expired beyond the
// driver's own renewal (390111, 390112, 390114), or refused with HTTP 401,
// which is how the server answers a session token it does not know (a
// session it dropped, e.g. after its idle timeout or a restart). The
// driver neither renews such a session nor reports the connection bad, so
// database/sql would hand the same dead connection out again: a caller
// that sees this must close its idle connections (see DropIdle).
func SessionLost(err error) bool {
	var se *sf.SnowflakeError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Number {
	case errSessionClosed, errSessionGone, errSessionExpired:
		return true
	case sf.ErrFailedToPostQuery:
		return len(se.MessageArgs) > 0 && fmt.Sprint(se.MessageArgs[0]) == "401"
	}
	return false
}

// DropIdle closes every idle connection of db, keeping maxIdle as its
// limit afterwards: the next statement logs in afresh. Connections in use
// are not touched; they come back to the pool and are dropped by the next
// DropIdle if they are dead too.
func DropIdle(db *sql.DB, maxIdle int) {
	db.SetMaxIdleConns(-1) // closes the idle ones
	db.SetMaxIdleConns(maxIdle)
}

// missingNamed turns a 390201 login error into the name of what is missing.
func (c *Config) missingNamed(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "warehouse"):
		return fmt.Sprintf("warehouse %q does not exist or is not authorized", c.Warehouse)
	case strings.Contains(m, "schema"):
		return fmt.Sprintf("schema %q does not exist or is not authorized", c.Schema)
	case strings.Contains(m, "database"):
		return fmt.Sprintf("database %q does not exist or is not authorized", c.Database)
	}
	return ""
}

// Retry runs op until it succeeds, fails with an error that is not
// retryable (flightline.IsRetryable), or budget is spent, sleeping with
// exponential backoff (from 100 ms, doubling, at most 5 s) between tries.
// The last error is returned; when it is retryable it is made
// ErrUnavailable if it is not classified already.
func Retry(ctx context.Context, budget time.Duration, op func(context.Context) error) error {
	deadline := time.Now().Add(budget)
	wait := 100 * time.Millisecond
	for {
		err := op(ctx)
		if err == nil || !flightline.IsRetryable(err) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			if !errors.Is(err, flightline.ErrUnavailable) && !errors.Is(err, flightline.ErrConflict) {
				err = fmt.Errorf("%w: %w", flightline.ErrUnavailable, err)
			}
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}
