package sync

import "goldbridge/serving/push"

// SipHash64 is the row hash Check uses (push.SipHash64), for the tests.
var SipHash64 = push.SipHash64
