package sync

import "goldbridge/serving/hot"

// The hot tier's contract (serving/hot), under the names sync's callers use.
type (
	Target          = hot.Target
	StorageReporter = hot.StorageReporter
	Served          = hot.Served
	Batch           = hot.Batch
	Published       = hot.Published
	ReadBack        = hot.ReadBack
	LevelStats      = hot.LevelStats
)

// newLevelStats returns empty LevelStats.
func newLevelStats() *LevelStats { return hot.NewLevelStats() }
