package hotconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// StartLake starts a private ClickHouse for goldbridge query: a temporary data directory
// under the state dir, free loopback ports, a one-time admin password, the warehouse as
// its working directory and the one directory it may read besides its own. It returns
// the HTTP base URL, the admin's password and the function that stops and removes it.
func (o Opener) StartLake(ctx context.Context, cfg *config.Config) (string, string, func(), error) {
	dir, err := os.MkdirTemp(cfg.StateDir, "query-clickhouse-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		cleanup()
		return "", "", nil, err
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		cleanup()
		return "", "", nil, err
	}
	pw := hex.EncodeToString(raw)
	lake := catalog.LocalDir(cfg.Lakehouse.Warehouse)
	srv, stopSrv, err := o.StartServer(ctx, chlocal.Options{
		Path: filepath.Join(dir, "data"), TCPPort: ports[0], HTTPPort: ports[1], Password: pw,
		Dir: lake, ReadDirs: []string{lake}, MaxServerMemory: cfg.ClickHouse.Local.MaxServerMemory,
	})
	if err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("lake clickhouse: %w", err)
	}
	return srv.HTTPURL(), pw, func() {
		stopSrv()
		cleanup()
	}, nil
}

// HTTPQuery runs one statement over the HTTP interface as user, with the given settings
// (nil: none), and copies the result to w.
func HTTPQuery(ctx context.Context, base, user, password, sql string, settings url.Values, w io.Writer) error {
	params := url.Values{"default_format": {"PrettyCompactMonoBlock"}}
	for k, v := range settings {
		params[k] = v
	}
	u := base + "/?" + params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(sql))
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, password)
	// No keep-alive: an idle client connection delays the embedded server's shutdown.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("clickhouse query: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("clickhouse query: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
