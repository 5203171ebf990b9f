// Package glue registers the Arrow schema a pipeline writes as a table in
// the AWS Glue Data Catalog, so Athena, Trino or Spark can query the
// Parquet files the pipeline lands on S3 without registering them by hand.
//
// Register creates the table on the first schema it sees and, when a later
// schema adds nullable columns, updates it to match; any other change (a
// column dropped, a type changed, a new non-nullable column) is an error
// naming the column, wrapping flightline.ErrSchemaMismatch, and the table
// is left as it was. The table is an EXTERNAL_TABLE over Parquet
// (ParquetHiveSerDe) at the configured S3 location; partition columns are
// registered as partition keys.
//
// The pairing of the table and the sink that writes its files is checked:
// a table that exists already must have the configured location,
// partition keys and table parameters (partition projection), or Verify
// and the first Register refuse it (flightline.ErrFailedPrecondition)
// naming every difference, and change nothing. AddPartitions registers
// the partitions a sink is about to write into.
//
// Errors from Glue carry flightline's sentinels: credentials refused
// (ErrUnauthenticated), rights missing (ErrPermissionDenied), an endpoint
// that does not answer or throttles (ErrUnavailable).
package glue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/glue/types"
	"github.com/aws/smithy-go"

	"github.com/flightline/flightline"
)

// Config names the table and where its data is.
type Config struct {
	Database, Table string
	Region          string
	Endpoint        string   // "" : the AWS default for the region
	Location        string   // s3://bucket/prefix of the Parquet files
	PartitionKeys   []string // columns the sink partitions by (COLUMN=VALUE directories)
	// DayPartition is the column a sink partitions by UTC day
	// (COLUMN_day=YYYY-MM-DD directories): the table gets the partition
	// key COLUMN_day of type date, and COLUMN stays a column.
	DayPartition string
	// Parameters are table parameters set on the table and required of
	// an existing one (partition projection's projection.*).
	Parameters map[string]string
	// Credentials sign the requests (nil: the SDK's default chain).
	Credentials aws.CredentialsProvider
	Logger      *slog.Logger
}

// Differences names what c and o disagree on about the table: database,
// table, location, partition keys (COLUMN_day for DayPartition) and
// parameters, each as "WHAT: c's, o's"; nil when they describe the same
// table. Region, endpoint and credentials are not compared.
func (c Config) Differences(o Config) []string {
	var d []string
	cmp := func(what, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s: %q, %q", what, a, b))
		}
	}
	cmp("database", c.Database, o.Database)
	cmp("table", c.Table, o.Table)
	cmp("location", strings.TrimSuffix(c.Location, "/")+"/", strings.TrimSuffix(o.Location, "/")+"/")
	keys := func(x Config) string {
		k := slices.Clone(x.PartitionKeys)
		if x.DayPartition != "" {
			k = append(k, x.DayPartition+DaySuffix)
		}
		return "[" + strings.Join(k, ", ") + "]"
	}
	cmp("partition keys", keys(c), keys(o))
	names := map[string]bool{}
	for k := range c.Parameters {
		names[k] = true
	}
	for k := range o.Parameters {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		cmp("parameter "+k, c.Parameters[k], o.Parameters[k])
	}
	return d
}

// DaySuffix ends the partition key of Config.DayPartition.
const DaySuffix = "_day"

// Registrar keeps one Glue table in step with the schema written. Safe for
// concurrent use.
type Registrar struct {
	cfg Config
	cl  *awsglue.Client
	log *slog.Logger

	mu       sync.Mutex
	last     *arrow.Schema       // last schema registered; nil before the first
	verified bool                // an existing table was found to match the pairing
	cols     []types.Column      // the table's columns as last registered
	parts    map[string]struct{} // partitions known to exist, by directory
}

// New returns a Registrar; credentials come from the SDK's default chain
// (AWS_ACCESS_KEY_ID, …). It does not contact Glue.
func New(ctx context.Context, cfg Config) (*Registrar, error) {
	if cfg.Database == "" || cfg.Table == "" || cfg.Location == "" {
		return nil, fmt.Errorf("%w: glue: database, table and location are required", flightline.ErrInvalidInput)
	}
	opts := []func(*awsconfig.LoadOptions) error{}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	if cfg.DayPartition != "" && slices.Contains(cfg.PartitionKeys, cfg.DayPartition+DaySuffix) {
		return nil, fmt.Errorf("%w: glue: partition key %s%s given twice", flightline.ErrInvalidInput, cfg.DayPartition, DaySuffix)
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("glue: %w", err)
	}
	cl := awsglue.NewFromConfig(ac, func(o *awsglue.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if o.Credentials != nil {
			o.Credentials = markedCredentials{o.Credentials}
		}
	})
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Registrar{cfg: cfg, cl: cl, log: log, parts: map[string]struct{}{}}, nil
}

// Config returns the registrar's configuration.
func (r *Registrar) Config() Config { return r.cfg }

// Register makes the table match sc: created if missing, updated with
// sc's new nullable columns, left alone when nothing changed. A schema
// equal to the last one registered costs no call.
func (r *Registrar) Register(ctx context.Context, sc *arrow.Schema) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && r.last.Equal(sc) {
		return nil
	}
	cols, parts, err := r.columns(sc)
	if err != nil {
		return err
	}
	// Another writer (another process, or another pipeline's Registrar)
	// may create or update the table between the read and the write: a
	// create that finds the table, or an update whose VersionId is stale
	// (real Glue's compare-and-swap), reads it again.
	for attempt := 1; ; attempt++ {
		err := r.apply(ctx, sc, cols, parts)
		var exists *types.AlreadyExistsException
		var moved *types.ConcurrentModificationException
		if attempt < 5 && (errors.As(err, &exists) || errors.As(err, &moved)) {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	r.last = sc
	r.cols = cols
	return nil
}

// apply makes the table match sc once: created, or evolved (an update
// conditional on the VersionId it read).
func (r *Registrar) apply(ctx context.Context, sc *arrow.Schema, cols, parts []types.Column) error {
	got, err := r.cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: &r.cfg.Database, Name: &r.cfg.Table})
	var nf *types.EntityNotFoundException
	switch {
	case errors.As(err, &nf):
		if err := r.create(ctx, cols, parts); err != nil {
			return err
		}
		r.log.Info("glue: created table", "database", r.cfg.Database, "table", r.cfg.Table, "columns", len(cols), "location", r.cfg.Location)
		return nil
	case err != nil:
		return r.errorf(err, "get table")
	}
	if err := r.pairing(got.Table, parts); err != nil {
		return err
	}
	added, err := evolve(got.Table, sc, cols)
	if err != nil {
		return fmt.Errorf("%w: glue table %s.%s: %v", flightline.ErrSchemaMismatch, r.cfg.Database, r.cfg.Table, err)
	}
	if len(added) == 0 {
		return nil
	}
	in := r.input(append(slices.Clone(got.Table.StorageDescriptor.Columns), added...), got.Table.PartitionKeys)
	if _, err := r.cl.UpdateTable(ctx, &awsglue.UpdateTableInput{DatabaseName: &r.cfg.Database, TableInput: in,
		VersionId: got.Table.VersionId}); err != nil {
		return r.errorf(err, "update table")
	}
	names := make([]string, len(added))
	for i, c := range added {
		names[i] = *c.Name
	}
	r.log.Info("glue: added columns", "database", r.cfg.Database, "table", r.cfg.Table, "columns", strings.Join(names, ","))
	return nil
}

func (r *Registrar) create(ctx context.Context, cols, parts []types.Column) error {
	_, err := r.cl.CreateTable(ctx, &awsglue.CreateTableInput{DatabaseName: &r.cfg.Database, TableInput: r.input(cols, parts)})
	var nf *types.EntityNotFoundException
	if errors.As(err, &nf) { // the database is missing: create it, once
		if _, err := r.cl.CreateDatabase(ctx, &awsglue.CreateDatabaseInput{DatabaseInput: &types.DatabaseInput{Name: &r.cfg.Database}}); err != nil {
			var exists *types.AlreadyExistsException
			if !errors.As(err, &exists) {
				return r.errorf(err, "create database")
			}
		}
		_, err = r.cl.CreateTable(ctx, &awsglue.CreateTableInput{DatabaseName: &r.cfg.Database, TableInput: r.input(cols, parts)})
	}
	if err != nil {
		return r.errorf(err, "create table")
	}
	r.verified = true
	return nil
}

func (r *Registrar) input(cols, parts []types.Column) *types.TableInput {
	params := map[string]string{"classification": "parquet", "EXTERNAL": "TRUE", "flightline.managed": "true"}
	for k, v := range r.cfg.Parameters {
		params[k] = v
	}
	return &types.TableInput{
		Name:          &r.cfg.Table,
		TableType:     aws.String("EXTERNAL_TABLE"),
		Parameters:    params,
		PartitionKeys: parts,
		StorageDescriptor: &types.StorageDescriptor{
			Columns:      cols,
			Location:     &r.cfg.Location,
			InputFormat:  aws.String("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"),
			OutputFormat: aws.String("org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"),
			SerdeInfo: &types.SerDeInfo{SerializationLibrary: aws.String(parquetSerDe),
				Parameters: map[string]string{"serialization.format": "1"}},
		},
	}
}

// parquetSerDe is the SerDe of the tables the Registrar creates.
const parquetSerDe = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

// columns maps sc to Glue columns, the partition keys apart.
func (r *Registrar) columns(sc *arrow.Schema) (cols, parts []types.Column, err error) {
	for _, f := range sc.Fields() {
		t, err := glueType(f.Type)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: glue: column %q: %v", flightline.ErrSchemaMismatch, f.Name, err)
		}
		c := types.Column{Name: aws.String(f.Name), Type: aws.String(t)}
		if slices.Contains(r.cfg.PartitionKeys, f.Name) {
			if !partitionable(t) {
				return nil, nil, fmt.Errorf("%w: glue: partition key %q is %s: a partition by value needs a string, integer, boolean or date column (partition by day for a timestamp)", flightline.ErrSchemaMismatch, f.Name, t)
			}
			parts = append(parts, c)
		} else {
			cols = append(cols, c)
		}
	}
	for _, k := range r.cfg.PartitionKeys {
		if len(sc.FieldIndices(k)) != 1 {
			return nil, nil, fmt.Errorf("%w: glue: partition key %q is not a column of the batch (schema %s)", flightline.ErrSchemaMismatch, k, sc)
		}
	}
	if d := r.cfg.DayPartition; d != "" {
		i := sc.FieldIndices(d)
		if len(i) != 1 {
			return nil, nil, fmt.Errorf("%w: glue: the day partition's column %q is not in the batch (schema %s)", flightline.ErrSchemaMismatch, d, sc)
		}
		switch sc.Field(i[0]).Type.ID() {
		case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		default:
			return nil, nil, fmt.Errorf("%w: glue: the day partition's column %q is %s, not a timestamp or date", flightline.ErrSchemaMismatch, d, sc.Field(i[0]).Type)
		}
		parts = append(parts, types.Column{Name: aws.String(d + DaySuffix), Type: aws.String("date")})
	}
	return cols, parts, nil
}

// partitionable says whether a Glue type can be a partition key whose
// values are directory names (Hive parses them back by type).
func partitionable(t string) bool {
	switch t {
	case "string", "tinyint", "smallint", "int", "bigint", "boolean", "date":
		return true
	}
	return false
}

// partitionNames are the partition keys of the configuration, in the
// order the table has them.
func (r *Registrar) partitionNames() []string {
	names := slices.Clone(r.cfg.PartitionKeys)
	if r.cfg.DayPartition != "" {
		names = append(names, r.cfg.DayPartition+DaySuffix)
	}
	return names
}

// Verify checks the pairing of an existing table with the configuration
// (see the package doc) and changes nothing; a missing table is fine (the
// first Register creates it). It runs once per Registrar while the table
// matches; Register runs it too.
func (r *Registrar) Verify(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verified {
		return nil
	}
	got, err := r.cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: &r.cfg.Database, Name: &r.cfg.Table})
	var nf *types.EntityNotFoundException
	switch {
	case errors.As(err, &nf):
		return nil
	case err != nil:
		return r.errorf(err, "get table")
	}
	return r.pairing(got.Table, nil)
}

// pairing compares an existing table with the configuration: location,
// partition keys (with their types when parts, from a schema, says them),
// the Parquet SerDe and the configured parameters. Every difference is
// named; none leaves r.verified set.
func (r *Registrar) pairing(t *types.Table, parts []types.Column) error {
	if r.verified && parts == nil {
		return nil
	}
	var diffs []string
	loc := ""
	if t.StorageDescriptor != nil {
		loc = aws.ToString(t.StorageDescriptor.Location)
	}
	if strings.TrimSuffix(loc, "/") != strings.TrimSuffix(r.cfg.Location, "/") {
		diffs = append(diffs, fmt.Sprintf("location is %q in Glue, the sink writes to %q", loc, r.cfg.Location))
	}
	var have, want []string
	for _, c := range t.PartitionKeys {
		have = append(have, strings.ToLower(aws.ToString(c.Name))+" "+aws.ToString(c.Type))
	}
	if parts != nil {
		for _, c := range parts {
			want = append(want, strings.ToLower(*c.Name)+" "+*c.Type)
		}
	} else {
		// Without a schema only the names are known: compare those.
		for i, n := range r.partitionNames() {
			typ := ""
			if i < len(have) {
				typ = have[i][strings.IndexByte(have[i], ' ')+1:]
			}
			want = append(want, strings.ToLower(n)+" "+typ)
		}
	}
	if !slices.Equal(have, want) {
		diffs = append(diffs, fmt.Sprintf("partition keys are [%s] in Glue, the sink partitions by [%s]", strings.Join(have, ", "), strings.Join(r.partitionNames(), ", ")))
	}
	if sd := t.StorageDescriptor; sd == nil || sd.SerdeInfo == nil || aws.ToString(sd.SerdeInfo.SerializationLibrary) != parquetSerDe {
		lib := ""
		if sd != nil && sd.SerdeInfo != nil {
			lib = aws.ToString(sd.SerdeInfo.SerializationLibrary)
		}
		diffs = append(diffs, fmt.Sprintf("SerDe is %q in Glue, the sink writes Parquet (%s)", lib, parquetSerDe))
	}
	keys := map[string]bool{}
	for k := range r.cfg.Parameters {
		keys[k] = true
	}
	for k := range t.Parameters {
		if strings.HasPrefix(k, "projection.") || k == "storage.location.template" {
			keys[k] = true
		}
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		g, inGlue := t.Parameters[k]
		w, inCfg := r.cfg.Parameters[k]
		switch {
		case !inGlue:
			diffs = append(diffs, fmt.Sprintf("parameter %s is missing in Glue, the sink sets %q", k, w))
		case !inCfg:
			diffs = append(diffs, fmt.Sprintf("parameter %s is %q in Glue, the sink does not set it", k, g))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("parameter %s is %q in Glue, the sink sets %q", k, g, w))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: glue table %s.%s does not match the sink writing its files: %s; change the sink's settings, or drop or alter the table",
			flightline.ErrFailedPrecondition, r.cfg.Database, r.cfg.Table, strings.Join(diffs, "; "))
	}
	r.verified = true
	return nil
}

// Partition is one partition of the table.
type Partition struct {
	// Values are the partition's values in the order of the table's
	// partition keys, as Hive reads them (HiveNull-style
	// __HIVE_DEFAULT_PARTITION__ for a null).
	Values []string
	// Dir is its directory under the table's location, e.g.
	// "ts_day=2026-01-02".
	Dir string
}

// AddPartitions registers the partitions of ps that Glue does not have
// (BatchCreatePartition; one that exists already is left as it is), each
// with the table's storage descriptor at Location/Dir/. Register must have
// succeeded before. Partitions registered by this Registrar cost no call.
func (r *Registrar) AddPartitions(ctx context.Context, ps []Partition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return fmt.Errorf("%w: glue: AddPartitions before Register", flightline.ErrInternal)
	}
	var in []types.PartitionInput
	var dirs []string
	for _, p := range ps {
		if _, ok := r.parts[p.Dir]; ok || slices.Contains(dirs, p.Dir) {
			continue
		}
		dirs = append(dirs, p.Dir)
		sd := r.input(r.cols, nil).StorageDescriptor
		sd.Location = aws.String(strings.TrimSuffix(r.cfg.Location, "/") + "/" + p.Dir + "/")
		in = append(in, types.PartitionInput{Values: p.Values, StorageDescriptor: sd})
	}
	for len(in) > 0 {
		n := min(len(in), 100) // BatchCreatePartition's limit
		out, err := r.cl.BatchCreatePartition(ctx, &awsglue.BatchCreatePartitionInput{DatabaseName: &r.cfg.Database,
			TableName: &r.cfg.Table, PartitionInputList: in[:n]})
		if err != nil {
			return r.errorf(err, "create partitions")
		}
		for _, e := range out.Errors {
			if e.ErrorDetail != nil && aws.ToString(e.ErrorDetail.ErrorCode) == "AlreadyExistsException" {
				continue
			}
			code, msg := "", ""
			if e.ErrorDetail != nil {
				code, msg = aws.ToString(e.ErrorDetail.ErrorCode), aws.ToString(e.ErrorDetail.ErrorMessage)
			}
			return r.errorf(&smithy.GenericAPIError{Code: code, Message: msg}, fmt.Sprintf("create partition %v", e.PartitionValues))
		}
		for _, d := range dirs[:n] {
			r.parts[d] = struct{}{}
		}
		in, dirs = in[n:], dirs[n:]
	}
	return nil
}

// credentialsError marks a failure of the credentials chain.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// markedCredentials marks its provider's errors as credentialsError.
type markedCredentials struct{ aws.CredentialsProvider }

func (m markedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return c, &credentialsError{err}
	}
	return c, nil
}

// errorf wraps an error of Glue's operation op with flightline's sentinel
// for its cause.
func (r *Registrar) errorf(err error, op string) error {
	where := fmt.Sprintf("glue %s %s.%s", op, r.cfg.Database, r.cfg.Table)
	if r.cfg.Endpoint != "" {
		where += " at " + r.cfg.Endpoint
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", where, err)
	}
	var ce *credentialsError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s: no AWS credentials found (%v): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE: %w", where, ce.err, flightline.ErrUnauthenticated)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "UnrecognizedClientException", "InvalidSignatureException", "IncompleteSignature", "MissingAuthenticationToken",
			"InvalidClientTokenId", "ExpiredTokenException", "ExpiredToken":
			return fmt.Errorf("%s: credentials refused (%s: %s): %w", where, ae.ErrorCode(), ae.ErrorMessage(), flightline.ErrUnauthenticated)
		case "AccessDeniedException", "AccessDenied":
			return fmt.Errorf("%s: %s: %w", where, ae.ErrorMessage(), flightline.ErrPermissionDenied)
		case "ThrottlingException", "InternalServiceException", "OperationTimeoutException", "ServiceUnavailable", "ServiceUnavailableException":
			return fmt.Errorf("%s: %s: %w", where, ae.ErrorCode(), flightline.ErrUnavailable)
		case "InvalidInputException", "ValidationException":
			return fmt.Errorf("%s: %s: %w", where, ae.ErrorMessage(), flightline.ErrInvalidInput)
		case "ConcurrentModificationException":
			return fmt.Errorf("%s: %s: %w", where, ae.ErrorMessage(), flightline.ErrConflict)
		case "EntityNotFoundException":
			return fmt.Errorf("%s: %s: %w", where, ae.ErrorMessage(), flightline.ErrNotFound)
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: cannot reach Glue (%v): check the endpoint and that the service is up: %w", where, err, flightline.ErrUnavailable)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// evolve returns the columns of want (typed as cols) that t lacks, or an
// error naming the first column whose change is not compatible.
func evolve(t *types.Table, sc *arrow.Schema, cols []types.Column) ([]types.Column, error) {
	have := map[string]string{}
	for _, c := range t.StorageDescriptor.Columns {
		have[strings.ToLower(*c.Name)] = *c.Type
	}
	for _, c := range t.PartitionKeys {
		have[strings.ToLower(*c.Name)] = *c.Type
	}
	want := map[string]bool{}
	var added []types.Column
	for _, c := range cols {
		name := strings.ToLower(*c.Name)
		want[name] = true
		old, ok := have[name]
		switch {
		case ok && old != *c.Type:
			return nil, fmt.Errorf("column %q: type %s in Glue, %s in the batch", *c.Name, old, *c.Type)
		case !ok:
			if i := sc.FieldIndices(*c.Name); len(i) == 1 && !sc.Field(i[0]).Nullable {
				return nil, fmt.Errorf("column %q: new and not nullable; only nullable columns may be added", *c.Name)
			}
			added = append(added, c)
		}
	}
	for _, c := range t.StorageDescriptor.Columns {
		if !want[strings.ToLower(*c.Name)] {
			return nil, fmt.Errorf("column %q: in Glue but not in the batch", *c.Name)
		}
	}
	return added, nil
}

// glueType is the Hive type name of an Arrow type, as Glue stores it.
func glueType(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return "boolean", nil
	case *arrow.Int8Type:
		return "tinyint", nil
	case *arrow.Int16Type, *arrow.Uint8Type:
		return "smallint", nil
	case *arrow.Int32Type, *arrow.Uint16Type:
		return "int", nil
	case *arrow.Int64Type, *arrow.Uint32Type:
		return "bigint", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "string", nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return "binary", nil
	case *arrow.Date32Type, *arrow.Date64Type:
		return "date", nil
	case *arrow.TimestampType:
		return "timestamp", nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale), nil
	case *arrow.DictionaryType:
		// Parquet stores a dictionary column as its values (dictionary
		// encoding is the file's business): the column is of their type.
		return glueType(t.ValueType)
	case *arrow.ListType:
		e, err := glueType(t.Elem())
		return "array<" + e + ">", err
	case *arrow.LargeListType:
		e, err := glueType(t.Elem())
		return "array<" + e + ">", err
	case *arrow.MapType:
		k, err := glueType(t.KeyType())
		if err != nil {
			return "", err
		}
		v, err := glueType(t.ItemType())
		return "map<" + k + "," + v + ">", err
	case *arrow.StructType:
		parts := make([]string, t.NumFields())
		for i, f := range t.Fields() {
			ft, err := glueType(f.Type)
			if err != nil {
				return "", fmt.Errorf("field %q: %w", f.Name, err)
			}
			parts[i] = f.Name + ":" + ft
		}
		return "struct<" + strings.Join(parts, ",") + ">", nil
	}
	return "", fmt.Errorf("arrow type %s has no Glue type", dt)
}

// Check asks Glue about the table without changing anything: it reports
// whether the table exists (and its column count) or will be created,
// exercising reachability and credentials.
func (r *Registrar) Check(ctx context.Context) (string, error) {
	got, err := r.cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: &r.cfg.Database, Name: &r.cfg.Table})
	var nf *types.EntityNotFoundException
	switch {
	case errors.As(err, &nf):
		return fmt.Sprintf("reachable; table %s.%s will be created on the first batch", r.cfg.Database, r.cfg.Table), nil
	case err != nil:
		return "", r.errorf(err, "get table")
	}
	r.mu.Lock()
	err = r.pairing(got.Table, nil)
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	n := 0
	if got.Table.StorageDescriptor != nil {
		n = len(got.Table.StorageDescriptor.Columns)
	}
	return fmt.Sprintf("reachable; table %s.%s has %d columns", r.cfg.Database, r.cfg.Table, n), nil
}
