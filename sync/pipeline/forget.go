package pipeline

import (
	"context"
	"errors"
	"fmt"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/forget"
)

// ErrForgetNotServed is returned by Forget when the lakehouse is clean but the push of
// the recomputed marts failed: sync (or the same forget) again finishes the job.
var ErrForgetNotServed = errors.New("the lakehouse is clean, but pushing the recomputed marts to ClickHouse failed (run sync or forget again)")

// Forget erases req from t's entity and everything downstream of it (forget.Run), or,
// given deleteKey, crypto-shreds the subject (forget.Shred); then it pushes the
// recomputed marts with the purge of every copy of the rows that left them. A result
// that is not Found changed nothing and pushed nothing.
func (r *Runner) Forget(ctx context.Context, t forget.Target, req bronze.ForgetRequest, deleteKey func(context.Context) (bool, error)) (forget.Result, error) {
	var res forget.Result
	var err error
	if deleteKey != nil {
		res, err = forget.Shred(ctx, r.Lake, t, req, deleteKey)
	} else {
		res, err = forget.Run(ctx, r.Lake, t, req)
	}
	if err != nil || !res.Found {
		return res, err
	}
	if err := r.Serve(ctx, "sync", res.Marts, ServeOptions{Purge: true}); err != nil {
		return res, fmt.Errorf("forget %s: %w: %w", t.Entity, ErrForgetNotServed, err)
	}
	return res, nil
}
