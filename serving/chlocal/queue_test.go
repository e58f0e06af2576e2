package chlocal_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"goldbridge/serving/chlocal"
)

// TestReadersQueue: the readers' queries run ReaderQueries at a time, the others wait
// their turn; the admin's never wait behind them; a reader cannot leave the queue; a
// restarted server has its queue again.
func TestReadersQueue(t *testing.T) {
	srv := startWithReader(t, chlocal.Options{ReaderQueries: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const admin, adminPW, reader, readerPW = chlocal.DefaultUser, "admin-pw", "grafana", "reader-pw"
	ask := func(user, pw, q string) string { t.Helper(); return postOK(t, srv, user, pw, q) }
	queue := func() {
		t.Helper()
		got := ask(admin, adminPW, "SELECT create_query FROM system.workloads WHERE name = 'goldbridge_readers'")
		if !strings.Contains(got, "max_concurrent_queries = 1") || !strings.Contains(got, "max_waiting_queries = 1000") {
			t.Fatalf("the readers' workload: %q", got)
		}
		if got := ask(reader, readerPW, "SELECT getSetting('workload')"); got != "goldbridge_readers" {
			t.Fatalf("a reader's workload is %q", got)
		}
	}
	queue()
	for _, q := range []string{
		"SELECT 1 SETTINGS workload = 'default'",
		"CREATE WORKLOAD mine",
		"DROP WORKLOAD goldbridge_readers",
	} {
		if code, body := post(t, srv, reader, readerPW, q, nil); code == http.StatusOK {
			t.Errorf("%q as the reader was served: %.200s", q, body)
		}
	}

	// Three readers' queries of 0.6 s each, one at a time: the last ends >= 1.8 s after
	// they were sent (all three at once would take ~0.6 s). An admin's query sent
	// meanwhile does not wait for them.
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var readersDone time.Duration
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, err := tryPost(srv, reader, readerPW, "SELECT sleep(0.6)", nil)
			if err != nil || code != http.StatusOK {
				t.Errorf("a reader's query: HTTP %d %s %v", code, body, err)
			}
			mu.Lock()
			readersDone = max(readersDone, time.Since(start))
			mu.Unlock()
		}()
	}
	time.Sleep(200 * time.Millisecond)
	ask(admin, adminPW, "SELECT 1")
	adminDone := time.Since(start)
	wg.Wait()
	if readersDone < 1800*time.Millisecond {
		t.Errorf("three 0.6 s readers' queries, one at a time, all ended after %v", readersDone)
	}
	if adminDone >= readersDone {
		t.Errorf("the admin's query ended after %v, not before the readers' (%v): it waited in their queue", adminDone, readersDone)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	queue()
}
