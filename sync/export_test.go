package sync

import (
	"github.com/apache/iceberg-go"

	"goldbridge/serving/fingerprint"
	"goldbridge/serving/push"
)

// SipHash64 is the row hash Check uses (push.SipHash64), for the tests.
var SipHash64 = push.SipHash64

// WithServerStates makes t build every aggregate state on the server from the detail
// rows (push.Options.ServerStates).
func WithServerStates(t *ClickHouse, on bool) *ClickHouse { t.serverStates = on; return t }

// WithFault makes t call f before each step of a push for every partition; an error
// aborts the push there (push.Options.Fault).
func WithFault(t *ClickHouse, f func(partition, step string) error) *ClickHouse {
	t.fault = f
	return t
}

// SetPrepared records a Prepare of mart for the Gold schema sch (one another table has).
func SetPrepared(t *ClickHouse, mart string, sch *iceberg.Schema) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ensured[mart] = ensured{schema: sch}
}

// StateDigest is Check's digest of a serialized state (fingerprint.AppendStateDigest).
func StateDigest(state []byte, width int) (string, error) {
	b, err := fingerprint.AppendStateDigest(nil, state, width)
	return string(b), err
}

// StateDigestSQL is the digest's ClickHouse expression (fingerprint.StateDigestSQL).
var StateDigestSQL = fingerprint.StateDigestSQL

// GoldStats are the per-level statistics Check computes from Gold, for a fake target's
// ReadBack.
var GoldStats = fingerprint.GoldStats
