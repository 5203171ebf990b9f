package athena

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	objs3 "github.com/flightline/flightline/flightsink/objsink/s3"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/schemasink/glue"
)

// DataDir is the directory, under a table's directory, that is the
// table's LOCATION.
const DataDir = "data"

// Partitions says how a partitioned table's partitions reach Glue.
type Partitions string

// The ways.
const (
	// Register: each partition a batch writes into is registered
	// (BatchCreatePartition) before the batch is committed.
	Register Partitions = "register"
	// Projection: Athena's partition projection (day partitions only):
	// the table's projection.* parameters describe every day from the
	// range's start to today; nothing is registered per batch.
	Projection Partitions = "projection"
)

// Config is what an athena sink is given in its URL or YAML.
type Config struct {
	// Location is BUCKET/PREFIX, the tables go under
	// s3://BUCKET/PREFIX/TABLE/. Required.
	Location string
	// Database is the Glue database (created if missing). Required.
	Database string
	// Table is the table of a pipeline without a target; a target names
	// another table of the database. Default "events".
	Table string
	// Region is the AWS region of Glue (and of S3 unless Storage says
	// it). Default: the SDK's.
	Region string
	// GlueEndpoint is the Glue endpoint URL, http(s)://host:port
	// (default: AWS's for the region).
	GlueEndpoint string
	// Storage holds the S3 storage options (objstore's AWS_* keys:
	// endpoint, keys, region). Its keys sign the Glue requests too.
	// Unknown keys are an error.
	Storage objstore.Options
	// PartitionBy partitions the table by this column's value (a string,
	// integer, boolean or date column): a Glue partition key of the
	// column's type, the column left out of the table's columns.
	PartitionBy string
	// PartitionByDay partitions the table by the UTC day of this
	// timestamp or date column: the partition key COLUMN_day (date), the
	// column kept. PartitionBy and PartitionByDay exclude each other.
	PartitionByDay string
	// Partitions is how partitions reach Glue (default Register).
	Partitions Partitions
	// ProjectionFrom is the first day of Projection's range (YYYY-MM-DD;
	// default 1970-01-01).
	ProjectionFrom string
	// SchemaEvolution accepts batches that add nullable columns at the
	// end of the table's schema (and adds them to the Glue table) instead
	// of refusing them. Default off.
	SchemaEvolution bool
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	database, table string
	region          string
	glueEndpoint    string
	storage         objstore.Options
	partitionBy     string
	partitionByDay  string
	partitions      Partitions
	projectionFrom  string
	evolve          bool
	log             *slog.Logger
	mem             memory.Allocator
}

// Logger sets the logger (nil: slog.Default()).
func Logger(l *slog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// Allocator sets the allocator Parquet encoding draws from.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error { o.mem = mem; return nil }
}

// tableName is Glue's and Athena's rule for names.
var tableName = regexp.MustCompile(`^[a-z0-9_]{1,255}$`)

// Sink is the athena sink; see the package doc. Safe for concurrent use.
type Sink struct {
	o      options
	obj    *objsink.Sink
	b      *objs3.Backend
	bucket string
	prefix string
	creds  aws.CredentialsProvider

	mu   sync.Mutex
	regs map[string]*glue.Registrar // by table
}

// New returns the sink of tables under s3://BUCKET/PREFIX (cfg.Location
// is BUCKET/PREFIX). It contacts nothing (it loads the SDK configuration,
// within ctx); it validates cfg (location, database and table names,
// partitioning, Glue endpoint, storage keys). Close releases nothing.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	location := cfg.Location
	o := options{database: cfg.Database, table: cfg.Table, region: cfg.Region, glueEndpoint: cfg.GlueEndpoint,
		storage: cfg.Storage, partitionBy: cfg.PartitionBy, partitionByDay: cfg.PartitionByDay,
		partitions: cfg.Partitions, projectionFrom: cfg.ProjectionFrom, evolve: cfg.SchemaEvolution, mem: memory.DefaultAllocator}
	if o.table == "" {
		o.table = "events"
	}
	switch o.partitions {
	case "":
		o.partitions = Register
	case Register, Projection:
	default:
		return nil, fmt.Errorf("athena sink: %w: partitions %q: want register or projection", flightline.ErrInvalidInput, o.partitions)
	}
	if u := o.glueEndpoint; u != "" {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https") {
			return nil, fmt.Errorf("athena sink: %w: glue endpoint %q: want http(s)://host:port", flightline.ErrInvalidInput, u)
		}
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("athena sink: %w", err)
		}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.mem == nil {
		o.mem = memory.DefaultAllocator
	}
	bucket, prefix, _ := strings.Cut(strings.Trim(location, "/"), "/")
	switch {
	case bucket == "" || strings.ContainsAny(bucket, "?#:"):
		return nil, fmt.Errorf("%w: athena sink: location %q: want BUCKET/PREFIX", flightline.ErrInvalidInput, location)
	case !tableName.MatchString(o.database):
		return nil, fmt.Errorf("%w: athena sink: database %q: want lowercase letters, digits and _ (required)", flightline.ErrInvalidInput, o.database)
	case !tableName.MatchString(o.table):
		return nil, fmt.Errorf("%w: athena sink: table %q: want lowercase letters, digits and _", flightline.ErrInvalidInput, o.table)
	case o.partitionBy != "" && o.partitionByDay != "":
		return nil, fmt.Errorf("%w: athena sink: partition_by and partition_by_day: give one", flightline.ErrInvalidInput)
	case o.partitions == Projection && o.partitionByDay == "":
		return nil, fmt.Errorf("%w: athena sink: partitions=projection projects days: it needs partition_by_day (partition_by needs partitions=register)", flightline.ErrInvalidInput)
	}
	if o.partitions == Projection {
		if o.projectionFrom == "" {
			o.projectionFrom = "1970-01-01"
		}
		if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(o.projectionFrom) {
			return nil, fmt.Errorf("%w: athena sink: projection range start %q: want YYYY-MM-DD", flightline.ErrInvalidInput, o.projectionFrom)
		}
	}
	for k := range o.storage {
		if !objstore.IsOption(k) {
			return nil, fmt.Errorf("%w: athena sink: unknown storage option %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(objstore.OptionKeys(), ", "))
		}
	}
	st := objstore.Options{}
	for k, v := range o.storage {
		st[k] = v
	}
	if st[objstore.Region] == "" && o.region != "" {
		st[objstore.Region] = o.region
	}
	if o.region == "" {
		o.region = st[objstore.Region]
	}
	b, err := objs3.New(ctx, objs3.Config{Bucket: bucket, Prefix: prefix, Storage: st})
	if err != nil {
		return nil, fmt.Errorf("athena sink: %w", err)
	}
	s := &Sink{o: o, b: b, bucket: bucket, prefix: strings.Trim(prefix, "/"), regs: map[string]*glue.Registrar{}}
	if id, secret := st[objstore.AccessKeyID], st[objstore.SecretAccessKey]; id != "" && secret != "" {
		s.creds = credentials.NewStaticCredentialsProvider(id, secret, st[objstore.SessionToken])
	}
	objCfg := objsink.Config{Backend: b, Name: "athena sink", SchemaEvolution: o.evolve}
	switch {
	case o.partitionBy != "":
		objCfg.PartitionBy = o.partitionBy
	case o.partitionByDay != "":
		objCfg.PartitionByDay = o.partitionByDay
	}
	if s.obj, err = objsink.New(ctx, objCfg, objsink.DataDir(DataDir), objsink.Allocator(o.mem), objsink.BeforeCommit(s.beforeCommit)); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases nothing (the S3 and Glue clients hold no connection of
// their own beyond the SDK's pool) and returns nil.
func (s *Sink) Close() error { return nil }

// Location is the table's LOCATION: s3://BUCKET/PREFIX/TABLE/data/.
func (s *Sink) Location(table string) string {
	parts := []string{s.bucket}
	if s.prefix != "" {
		parts = append(parts, s.prefix)
	}
	return "s3://" + strings.Join(append(parts, table, DataDir), "/") + "/"
}

// GlueConfig is the Glue registration of table, as the sink makes it: the
// other half of the pairing.
func (s *Sink) GlueConfig(table string) glue.Config {
	c := glue.Config{Database: s.o.database, Table: table, Region: s.o.region, Endpoint: s.o.glueEndpoint,
		Location: s.Location(table), Credentials: s.creds, Logger: s.o.log}
	if s.o.partitionBy != "" {
		c.PartitionKeys = []string{s.o.partitionBy}
	}
	if d := s.o.partitionByDay; d != "" {
		c.DayPartition = d
		if s.o.partitions == Projection {
			key := d + glue.DaySuffix
			c.Parameters = map[string]string{
				"projection.enabled":                   "true",
				"projection." + key + ".type":          "date",
				"projection." + key + ".format":        "yyyy-MM-dd",
				"projection." + key + ".range":         s.o.projectionFrom + ",NOW",
				"projection." + key + ".interval":      "1",
				"projection." + key + ".interval.unit": "DAYS",
				"storage.location.template":            s.Location(table) + key + "=${" + key + "}/",
			}
		}
	}
	return c
}

// table is the table of p: its target, or the default table.
func (s *Sink) table(p flightsink.Pipeline) (flightsink.Pipeline, error) {
	if p.Target == "" {
		p.Target = s.o.table
	}
	if !tableName.MatchString(p.Target) {
		return p, fmt.Errorf("%w: athena sink: target %q names the table: want lowercase letters, digits and _", flightline.ErrInvalidInput, p.Target)
	}
	return p, nil
}

// registrar returns the Glue registrar of table, made once.
func (s *Sink) registrar(ctx context.Context, table string) (*glue.Registrar, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.regs[table]; r != nil {
		return r, nil
	}
	r, err := glue.New(ctx, s.GlueConfig(table))
	if err != nil {
		return nil, fmt.Errorf("athena sink: %w", err)
	}
	s.regs[table] = r
	return r, nil
}

// beforeCommit makes the Glue table ready for a batch: the table matching
// its schema, and the partitions it writes into registered.
func (s *Sink) beforeCommit(ctx context.Context, c objsink.Commit) error {
	r, err := s.registrar(ctx, c.Target)
	if err != nil {
		return err
	}
	if err := r.Register(ctx, c.Schema); err != nil {
		return err
	}
	if (s.o.partitionBy == "" && s.o.partitionByDay == "") || s.o.partitions == Projection {
		return nil
	}
	ps := make([]glue.Partition, 0, len(c.Dirs))
	for _, d := range c.Dirs {
		_, v, ok := strings.Cut(d, "=")
		if !ok {
			return fmt.Errorf("%w: athena sink: partition directory %q", flightline.ErrInternal, d)
		}
		if v != objsink.HiveNull {
			if v, err = url.PathUnescape(v); err != nil {
				return fmt.Errorf("%w: athena sink: partition directory %q: %v", flightline.ErrInternal, d, err)
			}
		}
		ps = append(ps, glue.Partition{Values: []string{v}, Dir: d})
	}
	return r.AddPartitions(ctx, ps)
}

// Guarantee implements flightsink.Guaranteer.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Open implements flightsink.Sink: it checks the pairing of p's Glue
// table, if it exists, with the sink's settings (refusing a mismatch with
// flightline.ErrFailedPrecondition, naming the differences), then opens
// the pipeline on objsink (which fences older writers and recovers).
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	p, err := s.table(p)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.registrar(ctx, p.Target)
	if err != nil {
		return nil, nil, err
	}
	if err := r.Verify(ctx); err != nil {
		return nil, nil, err
	}
	return s.obj.Open(ctx, p)
}

// Checkpoint implements flightsink.Sink.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	p, err := s.table(p)
	if err != nil {
		return nil, err
	}
	return s.obj.Checkpoint(ctx, p)
}

// Ping checks the bucket and credentials (HEAD of the bucket), that the
// store honours If-None-Match: * (objsink's probe), and Glue: the
// default table reachable and, if it exists, paired with the sink.
func (s *Sink) Ping(ctx context.Context) error {
	if err := s.b.Store().HeadBucket(ctx); err != nil {
		return fmt.Errorf("athena sink %s: %w", s.b.URL(), err)
	}
	if err := s.obj.Probe(ctx); err != nil {
		return err
	}
	_, err := s.CheckTable(ctx, s.o.table)
	return err
}

// CheckTable asks Glue about table without changing anything (see
// glue.Registrar.Check).
func (s *Sink) CheckTable(ctx context.Context, table string) (string, error) {
	r, err := s.registrar(ctx, table)
	if err != nil {
		return "", err
	}
	return r.Check(ctx)
}
