package config

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sinkdbx "github.com/flightline/flightline/flightsink/databricks"
	"github.com/flightline/flightline/flightsrc"
	srcdbx "github.com/flightline/flightline/flightsrc/databricks"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/spec"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// Databricks endpoints (kinds databricks: and unity:) take a Unity Catalog
// table name after the kind and options as query keys:
//
//	databricks:main.sales.orders?host=https://dbc-1234.cloud.databricks.com
//
// Credentials come from the environment: DATABRICKS_TOKEN, or
// DATABRICKS_CLIENT_ID and DATABRICKS_CLIENT_SECRET (or the variables
// token_env / client_secret_env name); never put a secret in the URL.

// ucStorageKeys are the storage options a Unity Catalog table takes: no
// keys, the catalog vends them.
var ucStorageKeys = &spec.Extra{
	Doc:  "S3 options besides credentials, which the catalog vends",
	Keys: []string{objstore.Region, objstore.EndpointURL, objstore.AllowHTTP},
}

// ucConn is the workspace connection shared by the sink and source.
type ucConn struct {
	Host            *string        `spec:"host" doc:"workspace URL, https://HOST (default: $DATABRICKS_HOST)"`
	TokenEnv        *string        `spec:"token_env" doc:"environment variable holding a personal access token (default: DATABRICKS_TOKEN)"`
	ClientID        *string        `spec:"client_id" doc:"OAuth M2M service principal's client id (default: $DATABRICKS_CLIENT_ID)"`
	ClientSecretEnv *string        `spec:"client_secret_env" doc:"environment variable holding the OAuth client secret (default: DATABRICKS_CLIENT_SECRET)"`
	VendMargin      *time.Duration `spec:"vend_margin" doc:"re-vend table credentials when this much (or half their life) is left, but not before a quarter of their life (default 5m)"`
}

func (c ucConn) config(kind string) (unitycatalog.Config, unitycatalog.VendOptions, error) {
	var cfg unitycatalog.Config
	var vo unitycatalog.VendOptions
	if c.Host != nil {
		cfg.Host = *c.Host
	}
	if c.TokenEnv != nil {
		if cfg.Token = os.Getenv(*c.TokenEnv); cfg.Token == "" {
			return cfg, vo, fmt.Errorf("%w: %s: token_env=%s: the variable is unset or empty", flightline.ErrInvalidInput, kind, *c.TokenEnv)
		}
	}
	if c.ClientID != nil {
		cfg.ClientID = *c.ClientID
		env := unitycatalog.EnvClientSecret
		if c.ClientSecretEnv != nil {
			env = *c.ClientSecretEnv
		}
		if cfg.ClientSecret = os.Getenv(env); cfg.ClientSecret == "" {
			return cfg, vo, fmt.Errorf("%w: %s: client_id given but %s is unset or empty", flightline.ErrInvalidInput, kind, env)
		}
	} else if c.ClientSecretEnv != nil {
		return cfg, vo, fmt.Errorf("%w: %s: client_secret_env needs client_id", flightline.ErrInvalidInput, kind)
	}
	if c.VendMargin != nil {
		vo.Margin = *c.VendMargin
	}
	return cfg, vo, nil
}

// databricksSinkConfig is the databricks: sink kind.
type databricksSinkConfig struct {
	ucConn
	Instance           string            `spec:"instance" default:"default" doc:"this writer's name among the table's writers; the pipeline's fencing is per instance"`
	CheckpointInterval int               `spec:"checkpoint_interval" default:"10" doc:"write a Delta checkpoint every N commits (every multiple of N nearest below files/1000 once the table has 1000×N files or more)"`
	SchemaEvolution    bool              `spec:"schema_evolution" default:"false" doc:"add new nullable columns to the table instead of refusing the batch"`
	Storage            map[string]string `spec:",extra"`
}

// databricksSourceConfig is the databricks: source kind.
type databricksSourceConfig struct {
	ucConn
	Once      bool              `spec:"once" default:"false" doc:"stop at the table's current version instead of following new commits"`
	Stream    *string           `spec:"stream" doc:"the stream's name (default: the table's name)"`
	BatchRows *int              `spec:"batch_rows" doc:"rows per batch at most (default 65536)"`
	Poll      *time.Duration    `spec:"poll" doc:"pause between polls for new commits (default 1s)"`
	Storage   map[string]string `spec:",extra"`
}

var (
	databricksSinkSpec = spec.New[databricksSinkConfig]("databricks", "databricks:CATALOG.SCHEMA.TABLE?…",
		"exactly-once into an EXTERNAL Delta table of Databricks Unity Catalog, with vended credentials (a target names another table)", ucStorageKeys)
	databricksSourceSpec = spec.New[databricksSourceConfig]("databricks", "databricks:CATALOG.SCHEMA.TABLE?…",
		"a Delta table of Databricks Unity Catalog, with vended credentials: its snapshot, then new commits", ucStorageKeys)
)

func ucTable(kind string, u *url.URL) (string, error) {
	name := location(u)
	if err := unitycatalog.CheckName(name); err != nil {
		return "", fmt.Errorf("%s: want %s:CATALOG.SCHEMA.TABLE: %w", kind, kind, err)
	}
	return name, nil
}

func openDatabricksSink(e env, u *url.URL, c databricksSinkConfig) (flightsink.Sink, func(), error) {
	name, err := ucTable(u.Scheme, u)
	if err != nil {
		return nil, nil, err
	}
	cfg, vo, err := c.config(u.Scheme)
	if err != nil {
		return nil, nil, err
	}
	dc, err := deltaTableConfig(c.Instance, c.CheckpointInterval, c.SchemaEvolution)
	if err != nil {
		return nil, nil, err
	}
	s, err := sinkdbx.New(e.ctx, sinkdbx.Config{Table: name, Workspace: cfg, Storage: c.Storage, VendMargin: vo.Margin, Delta: dc}, sinkdbx.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func openDatabricksSource(e env, u *url.URL, c databricksSourceConfig) (flightsrc.Source, func(), error) {
	name, err := ucTable(u.Scheme, u)
	if err != nil {
		return nil, nil, err
	}
	cfg, vo, err := c.config(u.Scheme)
	if err != nil {
		return nil, nil, err
	}
	scfg := srcdbx.Config{Table: name, Workspace: cfg, StorageOptions: c.Storage, VendMargin: vo.Margin, Once: c.Once}
	if c.Stream != nil {
		scfg.Stream = *c.Stream
	}
	if c.BatchRows != nil {
		if *c.BatchRows < 1 { // 0 would mean the default
			return nil, nil, fmt.Errorf("%w: batch rows %d < 1", flightline.ErrInvalidInput, *c.BatchRows)
		}
		scfg.BatchRows = *c.BatchRows
	}
	if c.Poll != nil {
		scfg.PollInterval = *c.Poll
	}
	s, err := srcdbx.New(e.ctx, scfg, srcdbx.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func init() {
	sinkKinds["databricks"] = sinkOf(databricksSinkSpec, openDatabricksSink)
	sinkKinds["unity"] = sinkKind{spec: alias("unity:CATALOG.SCHEMA.TABLE?…  same as databricks:"), open: sinkKinds["databricks"].open}
	sourceKinds["databricks"] = sourceOf(databricksSourceSpec, openDatabricksSource)
	sourceKinds["unity"] = sourceKind{spec: alias("unity:CATALOG.SCHEMA.TABLE?…  same as databricks:"), open: sourceKinds["databricks"].open}
}
