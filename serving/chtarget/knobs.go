package chtarget

import "github.com/apache/iceberg-go"

// WithServerStates makes t build every aggregate state on the server from the detail
// rows (push.Options.ServerStates) instead of streaming states built from Gold's lists:
// the tests and the bench compare the two paths.
func WithServerStates(t *ClickHouse, on bool) *ClickHouse { t.serverStates = on; return t }

// WithFault makes t call f before each step of a push for every partition; an error
// aborts the push there (push.Options.Fault). For crash and fault tests.
func WithFault(t *ClickHouse, f func(partition, step string) error) *ClickHouse {
	t.fault = f
	return t
}

// SetPrepared records a Prepare of mart for the Gold schema sch, as if it had been done
// for a table of that schema. For the tests of the tables ensured ahead.
func SetPrepared(t *ClickHouse, mart string, sch *iceberg.Schema) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ensured[mart] = ensured{schema: sch}
}
