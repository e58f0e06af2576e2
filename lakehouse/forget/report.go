package forget

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"goldbridge/lakehouse/bronze"
)

// WritePlan writes what Plan found, for people: per table the subject's rows (or the
// Gold partitions they fed) and the snapshots a forget would expire, then what
// goldbridge cannot reach.
func (r Result) WritePlan(w io.Writer, req bronze.ForgetRequest) {
	if !r.Found {
		fmt.Fprintf(w, "forget %s (dry run): no row with %s in any table; a forget would change nothing\n", r.Entity, req)
		return
	}
	fmt.Fprintf(w, "forget %s (dry run): %s\n", r.Entity, req)
	for _, t := range r.Tables {
		fmt.Fprintf(w, "  %-10s %s: %s; would expire %d snapshots\n", t.Layer, t.Table, t.rowsText(), t.Snapshots)
	}
	r.writeUnreachable(w)
}

// WriteRun writes what Run or Shred did, for people: per table the rows erased and the
// snapshots and files deleted, then what goldbridge cannot reach.
func (r Result) WriteRun(w io.Writer, req bronze.ForgetRequest) {
	verb := "erased"
	if r.Shredded {
		verb = "shredded (key deleted; Bronze untouched)"
	}
	fmt.Fprintf(w, "forget %s: %s %s (bronze snapshot %d, %.2fs)\n", r.Entity, req, verb, r.BronzeSnapshot, r.Elapsed.Seconds())
	for _, t := range r.Tables {
		fmt.Fprintf(w, "  %-10s %s: %s; %d snapshots expired, %d data files and %d metadata files deleted\n",
			t.Layer, t.Table, t.rowsText(), t.Snapshots, t.DeletedFiles, t.DeletedMetadata)
	}
	r.writeUnreachable(w)
}

// rowsText is what the forget found in the table: rows and files, Gold partitions (the
// first 32), or a rebuild.
func (t TableReport) rowsText() string {
	var s string
	switch {
	case t.Layer == LayerGold:
		s = "recomputed"
		if n := len(t.Partitions); n > 0 {
			shown := t.Partitions[:min(n, 32)]
			s = fmt.Sprintf("%d partitions fed by the subject (%s", n, strings.Join(shown, ", "))
			if n > len(shown) {
				s += ", …"
			}
			s += ")"
		}
	case t.Rows < 0:
		s = "rebuilt"
	default:
		s = fmt.Sprintf("%d rows in %d data files", t.Rows, t.Files)
	}
	if t.Note != "" {
		s += " (" + t.Note + ")"
	}
	return s
}

func (r Result) writeUnreachable(w io.Writer) {
	fmt.Fprintln(w, "  not reachable by goldbridge (erase these yourself):")
	for _, u := range r.Unreachable {
		fmt.Fprintf(w, "    - %s\n", u)
	}
}

// Operator is who runs this process and where (Target.Operator and Host), "unknown"
// for what the system does not say.
func Operator() (who, host string) {
	who = "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return who, host
}
