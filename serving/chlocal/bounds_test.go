package chlocal_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"goldbridge/serving/chlocal"
)

// TestReadersBounds: a reader's query fails past its time or memory limit, with the
// error that says so and never a cut answer; a reader cannot raise or lift either, but
// may lower both (clickhouse-go sends max_execution_time with every query under a
// deadline, Grafana's plugin through it); the admin's queries have neither limit; the
// defaults hold on a server configured without.
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
	lower := "SELECT getSetting('max_execution_time'), getSetting('max_memory_usage') SETTINGS max_execution_time = 1, max_memory_usage = 10000000"
	if got := postOK(t, srv, reader, readerPW, lower); got != "1\t10000000" {
		t.Fatalf("the reader's lowered limits: %q", got)
	}

	dflt := startWithReader(t, chlocal.Options{})
	want := strconv.Itoa(int(chlocal.DefaultReaderTimeout/time.Second)) + "\t" +
		strconv.FormatInt(chlocal.DefaultReaderMemory, 10) + "\tthrow"
	if got := postOK(t, dflt, reader, readerPW, limits); got != want {
		t.Fatalf("the reader's default limits: %q, want %q", got, want)
	}
	for _, p := range []clickhouse.Protocol{clickhouse.Native, clickhouse.HTTP} {
		if got := askUnderDeadline(t, dflt, p, reader, readerPW); got < 30 || got > 35 {
			t.Fatalf("clickhouse-go (%s) under a 30s deadline: max_execution_time %d, want its own (the deadline + 5 s, whole seconds)", p, got)
		}
	}
}

// askUnderDeadline asks srv for its max_execution_time through clickhouse-go under a
// 30 s deadline, from which the driver sends max_execution_time (the time left + 5 s)
// with the query (and over HTTP with its connection's first query).
func askUnderDeadline(t *testing.T, srv *chlocal.Server, p clickhouse.Protocol, user, password string) uint64 {
	t.Helper()
	addr := srv.TCPAddr()
	if p == clickhouse.HTTP {
		addr = srv.HTTPAddr()
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr: []string{addr}, Protocol: p, DialTimeout: 10 * time.Second,
		Auth: clickhouse.Auth{Username: user, Password: password},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got uint64
	if err := conn.QueryRow(ctx, "SELECT toUInt64(getSetting('max_execution_time'))").Scan(&got); err != nil {
		t.Fatalf("clickhouse-go (%s) as %s: %v", p, user, err)
	}
	return got
}
