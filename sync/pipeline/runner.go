// Package pipeline runs goldbridge's stages — ingest, silver, gold, sync or check, and
// maintain — over a declared pipeline (a Plan) for one command or one scheduled job.
//
// Its promise: each entity, source and mart succeeds or fails on its own (source
// isolation): a failing one is named in the stage's error while the others go through
// every stage; every outcome is counted in the Metrics and printed on Out. The stages
// write through the lakehouse and sync packages, whose commits are atomic with their
// watermarks, so a run that fails or is killed at any point is repaired by running
// again. It takes no lock of its own: the caller holds the state lock (and leases with a
// shared catalog) for the Runner's life.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/maintain"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	gbsync "goldbridge/sync"
)

// Plan is the declared pipeline the stages run, as the configuration resolves it.
type Plan interface {
	Entities() []string // every entity, sorted
	Marts() []string    // every mart, sorted
	// Entity is one entity's tables, sources and Silver spec.
	Entity(name string) (Entity, error)
	// Kafka is one entity's Kafka sources, resolved (TLS files read) when it is ingested.
	Kafka(name string) ([]bronze.KafkaSource, error)
	// PII returns the entity's Bronze transform and Silver decrypter (both nil without
	// personal data to protect); they use keys held in lh.
	PII(ctx context.Context, lh *catalog.Lakehouse, name string) (encrypt, decrypt func([]byte) ([]byte, error), err error)
	// Mart is one mart's Gold spec and serving settings.
	Mart(name string) (Mart, error)
	// Served is the serving model of a mart whose serving is enabled.
	Served(name string) (*serving.Mart, error)
	// Maintenance is the lake maintenance policy.
	Maintenance() Maintenance
}

// Entity is what the ingest and silver stages need of one entity.
type Entity struct {
	Bronze string // the Bronze table
	// BronzeCodec compresses the Bronze table's data files (bronze.Options.Codec).
	BronzeCodec catalog.Codec
	BatchRows   int // rows per Bronze batch (0: the default)
	Files       []bronze.FileSource
	Silver      silver.EntitySpec
	PassRows    int64    // silver.Options.PassRows
	PassBytes   int64    // silver.Options.PassBytes
	Lookups     []string // the entities whose Silver tables its lookups read
}

// Mart is what the gold and sync stages need of one mart.
type Mart struct {
	Gold        gold.MartSpec
	Reads       []string // the entities it reads: its source, then its joins
	Serving     bool     // served in ClickHouse
	Parallelism int      // sync parallelism (0: the default)
	BatchRows   int      // rows per push batch (0: the default)
}

// Maintenance is the lake maintenance policy of a pipeline.
type Maintenance struct {
	Enabled bool
	Every   time.Duration // how often run and serve maintain by themselves
	// Policy is the policy of one table of the given maintain layer.
	Policy func(ident, layer string) maintain.Policy
}

// Target is a hot-tier sync target that can also ensure a mart's tables ahead of its
// sync (chtarget.ClickHouse, chtarget.Sharded).
type Target interface {
	gbsync.Target
	Prepare(ctx context.Context, m *serving.Mart, tbl *table.Table) error
}

// Hot is how the sync and check stages reach the hot tier.
type Hot struct {
	// Open connects (starting the embedded server if needed); done closes the connection
	// and stops a server it started.
	Open func(ctx context.Context) (t Target, done func(), err error)
	// Name names the target in the push records: a record of one target never stands
	// for another.
	Name string
	// EmbeddedDir is the embedded ClickHouse's data directory ("" for an external one).
	EmbeddedDir string
}

// Runner runs stages for one command invocation or one scheduled job. The fields above
// the options are set by the caller; a Runner is used by one goroutine and closed once.
type Runner struct {
	Lake     *catalog.Lakehouse
	Plan     Plan
	Hot      Hot
	Metrics  *Metrics
	Log      *slog.Logger
	Out      io.Writer // the stages' summaries
	StateDir string    // push records, stamps of the last sweep and maintenance
	// Progress, if set, reports an entity's ingest; done finishes the report.
	Progress func(entity string, totalBytes int64) (report func(bytes, rows int64), done func())

	Reingest         bool // ingest --reingest
	RetryQuarantined bool // ingest --retry-quarantined
	Full             bool // gold --full
	Rebuild          bool // gold --rebuild
	NoDelta          bool // gold --no-delta

	ch             *chOpening     // ClickHouse connection opened ahead (Run), or nil
	aheadOnLanding []string       // open ClickHouse ahead (ensuring these marts) once ingest lands rows
	landed         bool           // ingest committed something to Bronze
	committed      bool           // a stage committed something to the lake (MaintainDue)
	outcomes       outcomes       // what failed in the stages run so far, for the later stages' errors
	bg             sync.WaitGroup // metric reads left to run beside the next stages; Close waits
}

// Close waits for the metric reads still running and closes a ClickHouse connection
// opened ahead that no stage took. It does not close Lake, which the caller owns.
func (r *Runner) Close() {
	r.bg.Wait()
	if o := r.ch; o != nil && !o.taken { // a run that ended before its sync stage
		<-o.done
		o.taken = true
		if o.err == nil {
			o.close()
		}
	}
}

// chOpening is a ClickHouse connection being opened while earlier stages run.
type chOpening struct {
	done  chan struct{}
	t     Target
	close func()
	err   error
	taken bool
}

// openAhead starts connecting to ClickHouse (and starting the embedded server if needed)
// in the background; the sync stage takes the connection.
//
// The tables of the served marts whose Gold table exists are ensured (DDL checked and
// created) on it too (Target.Prepare): ~8 statements, 20-35 ms a mart, that the sync
// stage then skips unless the gold stage changed the Gold schema. A failure there is
// left to the sync stage, which ensures again and reports it.
func (r *Runner) openAhead(ctx context.Context, ensure []string) {
	o := &chOpening{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.t, o.close, o.err = r.Hot.Open(ctx)
		if o.err != nil {
			return
		}
		for _, name := range ensure {
			mc, err := r.Plan.Mart(name)
			if err != nil {
				continue
			}
			tbl, err := r.Lake.LoadTable(ctx, mc.Gold.Table)
			if err != nil || gbsync.CircuitOpen(tbl) {
				continue // no Gold table yet, or a sync that may be skipped: left to the sync stage
			}
			if m, err := r.Plan.Served(name); err == nil {
				_ = o.t.Prepare(ctx, m, tbl) // a failure is left to the sync stage, which reports it
			}
		}
	}()
	r.ch = o
}

// hot returns the target opened ahead, or opens one; done closes it.
func (r *Runner) hot(ctx context.Context) (t Target, done func(), err error) {
	if o := r.ch; o != nil && !o.taken {
		<-o.done
		o.taken = true
		return o.t, o.close, o.err
	}
	return r.Hot.Open(ctx)
}

// observe records a stage run's duration and outcome.
func (r *Runner) observe(stage string, start time.Time, err error) {
	outcome := "success"
	switch {
	case errors.Is(err, gold.ErrCircuitOpen):
		outcome = "circuit_open"
	case err != nil:
		outcome = "failure"
	}
	r.Metrics.StageDuration.WithLabelValues(stage, outcome).Observe(time.Since(start).Seconds())
	r.Metrics.Runs.WithLabelValues(stage, outcome).Inc()
}

// failures collects what failed in a stage while the other entities, sources or marts
// went on (source isolation): err names each of them.
type failures struct {
	stage string
	names []string
	errs  []error
}

func (f *failures) add(name string, err error) {
	f.names = append(f.names, name)
	f.errs = append(f.errs, err)
}

// err is nil when nothing failed, the failure itself when one did, else all of them.
func (f *failures) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	if len(f.errs) == 1 {
		return f.errs[0]
	}
	return fmt.Errorf("%s failed for %s: %w", f.stage, strings.Join(f.names, ", "), errors.Join(f.errs...))
}

// SweepOrphans deletes the files that writes killed midway left in the lakehouse, once
// they are older than catalog.SweepAge (docs/operations.md, "Failed writes and disk
// space"). The caller holds the state lock. A failure is logged: the run goes on. It
// sweeps at most once per SweepAge (the stamp <state-dir>/orphan-sweep): listing every
// table's files and reading all its manifests is a cost a run with nothing to do should
// not pay each time, and a file younger than SweepAge is kept anyway.
func (r *Runner) SweepOrphans(ctx context.Context) {
	stamp := filepath.Join(r.StateDir, "orphan-sweep")
	if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < catalog.SweepAge {
		return
	}
	start := time.Now()
	sw, err := r.Lake.SweepOrphans(ctx, catalog.SweepAge)
	if sw.Files > 0 {
		r.Log.Info("removed files of failed writes", "files", sw.Files, "bytes", sw.Bytes, "seconds", fmt.Sprintf("%.2f", time.Since(start).Seconds()))
	}
	if err == nil {
		_ = os.WriteFile(stamp, nil, 0o600)
	}
	if err != nil && ctx.Err() == nil {
		r.Log.Warn("sweeping files of failed writes", "err", err)
	}
}
