package sync

import (
	"goldbridge/serving/fingerprint"
	"goldbridge/serving/push"
)

// SipHash64 is the row hash Check uses (push.SipHash64), for the tests.
var SipHash64 = push.SipHash64

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
