package sync

// SipHash64 exports sipHash64 to the tests.
var SipHash64 = sipHash64
