package duckdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/flightline/flightline"
	fadbc "github.com/flightline/flightline/adbc"
)

// LibraryEnv is the environment variable naming libduckdb.so.
const LibraryEnv = "FLIGHTLINE_DUCKDB_LIB"

// TokenEnv is the environment variable DuckDB's motherduck extension reads
// its token from.
const TokenEnv = "motherduck_token"

var (
	// ErrNoLibrary marks a binary that cannot find DuckDB's shared
	// library. errors.Is ErrFailedPrecondition.
	ErrNoLibrary = fmt.Errorf("%w: duckdb: libduckdb.so not found", flightline.ErrFailedPrecondition)
	// ErrLocked marks a database file another process holds open (DuckDB
	// lets one process write a file). errors.Is ErrFailedPrecondition:
	// retrying does not help while that process runs.
	ErrLocked = fmt.Errorf("%w: duckdb: database file is locked by another process", flightline.ErrFailedPrecondition)
)

// FindLibrary returns the path of libduckdb.so: lib when not empty, else
// $FLIGHTLINE_DUCKDB_LIB, else libduckdb.so beside the running executable,
// else the newest copy under the set-up's cache ($FLIGHTLINE_CACHE or
// ~/.cache/flightline, duckdb-VERSION/libduckdb.so). It fails with
// ErrNoLibrary naming the places it looked.
func FindLibrary(lib string) (string, error) {
	if lib != "" {
		if _, err := os.Stat(lib); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoLibrary, err)
		}
		return filepath.Abs(lib)
	}
	if env := os.Getenv(LibraryEnv); env != "" {
		if _, err := os.Stat(env); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %w", ErrNoLibrary, LibraryEnv, env, err)
		}
		return env, nil
	}
	var looked []string
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "libduckdb.so")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		looked = append(looked, p)
	}
	cache := os.Getenv("FLIGHTLINE_CACHE")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache", "flightline")
		}
	}
	if cache != "" {
		pat := filepath.Join(cache, "duckdb-*", "libduckdb.so")
		m, _ := filepath.Glob(pat)
		if len(m) > 0 {
			sort.Strings(m)
			return m[len(m)-1], nil
		}
		looked = append(looked, pat)
	}
	return "", fmt.Errorf("%w (set %s, or run integration/services/services.sh up duckdb, which fetches it; looked in %s)",
		ErrNoLibrary, LibraryEnv, strings.Join(looked, ", "))
}

// registry holds the databases open in this process, one per file: DuckDB
// must not open one file twice in a process (two instances would write it
// unaware of each other).
var registry = struct {
	sync.Mutex
	dbs map[string]*shared
}{dbs: map[string]*shared{}}

type shared struct {
	mu   sync.Mutex // serialises the database's calls (adbcsink.Serialize)
	db   *fadbc.DB
	lib  string
	refs int
}

// key is the registry key of path: its absolute, cleaned form for a file,
// the path itself for md: or :memory:.
func key(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: duckdb: empty database path", flightline.ErrInvalidInput)
	}
	if IsMotherDuck(path) || path == ":memory:" {
		return path, nil
	}
	return filepath.Abs(path)
}

// IsMotherDuck says whether path names a MotherDuck database ("md:…").
func IsMotherDuck(path string) bool { return strings.HasPrefix(path, "md:") }

// openShared returns this process's database for path, opening it on
// first use; release gives it back (the last release closes it).
func openShared(ctx context.Context, path, lib string) (s *shared, release func() error, err error) {
	k, err := key(path)
	if err != nil {
		return nil, nil, err
	}
	if path == ":memory:" {
		return nil, nil, fmt.Errorf("%w: duckdb: an in-memory database keeps nothing across a restart, so it cannot hold a checkpoint; give a file", flightline.ErrInvalidInput)
	}
	if IsMotherDuck(path) && os.Getenv(TokenEnv) == "" && os.Getenv(strings.ToUpper(TokenEnv)) == "" {
		return nil, nil, fmt.Errorf("%w: duckdb: %s is a MotherDuck database and %s is not set in the environment", flightline.ErrUnauthenticated, path, TokenEnv)
	}
	lib, err = FindLibrary(lib)
	if err != nil {
		return nil, nil, err
	}
	registry.Lock()
	defer registry.Unlock()
	if s = registry.dbs[k]; s != nil {
		if s.lib != lib {
			return nil, nil, fmt.Errorf("%w: duckdb: %s is open in this process with library %s, not %s", flightline.ErrInvalidInput, path, s.lib, lib)
		}
		s.refs++
		return s, releaser(k, s), nil
	}
	if !IsMotherDuck(path) {
		if err := os.MkdirAll(filepath.Dir(k), 0o755); err != nil {
			return nil, nil, fmt.Errorf("duckdb: %w", err)
		}
	}
	db, err := fadbc.Open(ctx, fadbc.Config{
		Driver:  lib,
		Options: map[string]string{"entrypoint": "duckdb_adbc_init", "path": pathOption(k, path)},
		Dialect: fadbc.DuckDB,
	})
	if err != nil {
		return nil, nil, classify(err, path)
	}
	s = &shared{db: db, lib: lib, refs: 1}
	registry.dbs[k] = s
	return s, releaser(k, s), nil
}

func pathOption(k, path string) string {
	if IsMotherDuck(path) {
		return path
	}
	return k
}

func releaser(k string, s *shared) func() error {
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			registry.Lock()
			defer registry.Unlock()
			s.refs--
			if s.refs == 0 {
				delete(registry.dbs, k)
				err = s.db.Close()
			}
		})
		return err
	}
}

// classify turns DuckDB's refusal to lock a file into ErrLocked. DuckDB
// gives no code for it; its message ("Could not set lock on file …:
// Conflicting lock is held in PROGRAM (PID N)") is the only sign, read
// here and nowhere else.
func classify(err error, path string) error {
	msg := err.Error()
	if strings.Contains(msg, "Could not set lock on file") {
		holder := ""
		if i := strings.Index(msg, "Conflicting lock is held in"); i >= 0 {
			holder = msg[i:]
			if j := strings.Index(holder, ")"); j > 0 {
				holder = holder[:j+1]
			} else if j := strings.IndexByte(holder, '\n'); j > 0 {
				holder = holder[:j]
			}
			holder = " (" + strings.TrimSpace(holder) + ")"
		}
		return fmt.Errorf("%w: %s%s; stop that process or give another file", ErrLocked, path, holder)
	}
	var ae *fadbc.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("duckdb: open %s: %w", path, err)
	}
	return err
}

// DB is a DuckDB database opened for reading and ad-hoc SQL (flightline
// query), sharing this process's one database per file with the Sinks.
type DB struct {
	s       *shared
	release func() error
}

// Open opens the database at path as New does (ErrNoLibrary, ErrLocked,
// ErrUnauthenticated alike); lib is the library's path, or "" for
// FindLibrary's search.
func Open(ctx context.Context, path, lib string) (*DB, error) {
	s, release, err := openShared(ctx, path, lib)
	if err != nil {
		return nil, err
	}
	return &DB{s: s, release: release}, nil
}

// Conn returns a new connection and takes the database's lock, which the
// Sinks of this process wait on (see adbcsink.Serialize): call the
// returned unlock once done with the connection, after closing it.
func (d *DB) Conn(ctx context.Context) (c *fadbc.Conn, unlock func(), err error) {
	d.s.mu.Lock()
	c, err = d.s.db.Conn(ctx)
	if err != nil {
		d.s.mu.Unlock()
		return nil, nil, err
	}
	return c, d.s.mu.Unlock, nil
}

// Close gives the database back (closing it when no Sink of this process
// uses it).
func (d *DB) Close() error { return d.release() }

// OpenMemory opens an in-memory DuckDB database of its own (not shared, not
// registered), for queries over files it attaches read-only (flightline
// query). lib is as in Open.
func OpenMemory(ctx context.Context, lib string) (*DB, error) {
	lib, err := FindLibrary(lib)
	if err != nil {
		return nil, err
	}
	db, err := fadbc.Open(ctx, fadbc.Config{
		Driver:  lib,
		Options: map[string]string{"entrypoint": "duckdb_adbc_init", "path": ":memory:"},
		Dialect: fadbc.DuckDB,
	})
	if err != nil {
		return nil, err
	}
	return &DB{s: &shared{db: db, lib: lib, refs: 1}, release: db.Close}, nil
}

// Attach attaches the database file at path read-only as name, on c, and
// makes it the default for unqualified names (USE). A file another
// process writes is refused with ErrLocked.
func Attach(ctx context.Context, c *fadbc.Conn, path, name string) error {
	q := "ATTACH '" + strings.ReplaceAll(path, "'", "''") + "' AS " + fadbc.Quote(name) + " (READ_ONLY)"
	if _, err := c.Exec(ctx, q); err != nil {
		return classify(err, path)
	}
	if _, err := c.Exec(ctx, "USE "+fadbc.Quote(name)); err != nil {
		return fmt.Errorf("duckdb: %w", err)
	}
	return nil
}
