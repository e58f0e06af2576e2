package bronze

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSourceFailed matches (errors.Is) the error of an IngestFiles run in which some
// sources could not be read while the others were ingested.
var ErrSourceFailed = errors.New("a source failed; the other sources were ingested")

// FailedSource is a file source an ingest run could not read.
type FailedSource struct {
	Name string
	Err  error
}

// sourcesErr is nil when every source of the run was read, else the error naming the
// failed ones.
func (res Result) sourcesErr(sources int) error {
	if len(res.Failed) == 0 {
		return nil
	}
	errs := make([]error, len(res.Failed))
	for i, f := range res.Failed {
		errs[i] = fmt.Errorf("source %s: %w", f.Name, f.Err)
	}
	msg := fmt.Sprintf("bronze %s: %d of %d sources failed, the others were ingested", res.Table, len(errs), sources)
	if len(errs) == sources {
		msg = fmt.Sprintf("bronze %s: every source failed", res.Table)
	}
	return &sourcesError{msg, errs}
}

// sourcesError is the error of a run some of whose sources failed; it matches
// ErrSourceFailed and unwraps to each source's error.
type sourcesError struct {
	msg  string
	errs []error
}

func (e *sourcesError) Error() string {
	parts := make([]string, len(e.errs))
	for i, err := range e.errs {
		parts[i] = err.Error()
	}
	return e.msg + ": " + strings.Join(parts, "; ")
}

func (e *sourcesError) Unwrap() []error      { return e.errs }
func (e *sourcesError) Is(target error) bool { return target == ErrSourceFailed }
