package catalog_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// substraitInit is the runtime's GODEBUG=inittrace=1 line for iceberg-go's
// table/substrait package: "init <pkg> @<t> ms, <clock> ms clock, <bytes> bytes, <n> allocs".
var substraitInit = regexp.MustCompile(`(?m)^init github\.com/apache/iceberg-go/table/substrait @\S+ ms, (\S+) ms clock, (\d+) bytes, (\d+) allocs$`)

// TestIcebergInitIsCheap: linking iceberg-go's table package (every goldbridge binary
// does) must not parse substrait's extension YAML at start-up, which upstream v0.7.0
// does in table/substrait's init (~33 MB, 534k allocations, 0.15-0.7 s); the copy in
// third_party/iceberg-go builds it on first use. The test binary reruns itself with
// no tests under GODEBUG=inittrace=1 and reads the Go runtime's own trace line.
func TestIcebergInitIsCheap(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun with inittrace: %v\n%s", err, out)
	}
	m := substraitInit.FindSubmatch(out)
	if m == nil {
		// No initialisation work at all in the package: nothing to pay.
		if !regexp.MustCompile(`(?m)^init `).Match(out) {
			t.Fatalf("no inittrace output: is GODEBUG=inittrace=1 still supported?\n%s", out)
		}
		return
	}
	bytes, _ := strconv.Atoi(string(m[2]))
	allocs, _ := strconv.Atoi(string(m[3]))
	const maxBytes, maxAllocs = 64 << 10, 100
	if bytes > maxBytes || allocs > maxAllocs {
		t.Errorf("table/substrait init: %d bytes, %d allocs, %s ms; want at most %d bytes and %d allocs (the extension YAML is parsed at init again: third_party/README.md)",
			bytes, allocs, m[1], maxBytes, maxAllocs)
	}
}
