package chlocal_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"goldbridge/serving/chlocal"
)

// TestReadersBounds: a reader's query fails past its time or memory limit, with the
// error that says so and never a cut answer; a reader cannot raise or lift either; the
// admin's queries have neither limit; the defaults hold on a server configured without.
func TestReadersBounds(t *testing.T) {
	const admin, adminPW, reader, readerPW = chlocal.DefaultUser, "admin-pw", "grafana", "reader-pw"
	const memory = chlocal.MinReaderMemory
	srv := startWithReader(t, chlocal.Options{ReaderTimeout: time.Second, ReaderMemory: memory})
	limits := "SELECT getSetting('max_execution_time'), getSetting('max_memory_usage'), getSetting('timeout_overflow_mode')"
	if got, want := postOK(t, srv, reader, readerPW, limits), "1\t"+strconv.FormatInt(memory, 10)+"\tthrow"; got != want {
		t.Fatalf("the reader's limits: %q, want %q", got, want)
	}
	if got := postOK(t, srv, admin, adminPW, limits); got != "0\t0\tthrow" {
		t.Fatalf("the admin's limits: %q, want none", got)
	}

	// ~5M distinct keys: a hash table of ~200 MB, over the reader's 64 MB.
	const big = "SELECT count() FROM (SELECT number, count() FROM numbers(5000000) GROUP BY number)"
	if got := postOK(t, srv, admin, adminPW, big); got != "5000000" {
		t.Fatalf("the admin's big query: %q", got)
	}
	refused := func(q, want string) {
		t.Helper()
		start := time.Now()
		code, body := post(t, srv, reader, readerPW, q, nil)
		if code == http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("%s as the reader: HTTP %d %.300s, want an error %s", q, code, body, want)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("%s as the reader failed after %v", q, d)
		}
	}
	refused(big, "MEMORY_LIMIT_EXCEEDED")
	refused("SELECT sum(cityHash64(number)) FROM numbers(1000000000000)", "TIMEOUT_EXCEEDED")
	for _, s := range []string{"max_execution_time = 0", "max_execution_time = 3600", "max_memory_usage = 0",
		"max_memory_usage = 100000000000", "timeout_overflow_mode = 'break'"} {
		refused("SELECT 1 SETTINGS "+s, "SETTING_CONSTRAINT_VIOLATION")
	}
	// The server still answers its readers after both.
	if got := postOK(t, srv, reader, readerPW, "SELECT 1"); got != "1" {
		t.Fatalf("the reader after the refusals: %q", got)
	}

	dflt := startWithReader(t, chlocal.Options{})
	want := strconv.Itoa(int(chlocal.DefaultReaderTimeout/time.Second)) + "\t" +
		strconv.FormatInt(chlocal.DefaultReaderMemory, 10) + "\tthrow"
	if got := postOK(t, dflt, reader, readerPW, limits); got != want {
		t.Fatalf("the reader's default limits: %q, want %q", got, want)
	}
}
