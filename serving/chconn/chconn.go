// Package chconn opens goldbridge's connections to ClickHouse from plain options:
// clickhouse-go (native or HTTP) for DDL and queries, and a raw columnar block insert
// path (ch-go over the native protocol, or the Native format over HTTP) for pushes.
// Passwords never appear in errors or String().
package chconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/ch-go"
	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Options describe one ClickHouse server (or the first reachable of several).
type Options struct {
	Addresses    []string // host:port of the chosen protocol
	HTTP         bool     // HTTP instead of the native protocol
	Database     string   // default database of the connection
	User         string
	Password     string
	TLS          *tls.Config // nil: plain text
	DialTimeout  time.Duration
	Settings     map[string]string // sent with every query
	MaxRetries   int               // retries of a failed step on connection errors
	RetryBackoff time.Duration     // first backoff, doubled per retry, capped at 30 s
}

// Client holds the query connection and opens insert streams.
type Client struct {
	opt  Options
	conn driver.Conn
	http *http.Client
}

// String describes the client without its password.
func (c *Client) String() string {
	p := "native"
	if c.opt.HTTP {
		p = "http"
	}
	return fmt.Sprintf("clickhouse %s://%s@%s/%s", p, c.opt.User, strings.Join(c.opt.Addresses, ","), c.opt.Database)
}

// Open connects and pings.
func Open(ctx context.Context, opt Options) (*Client, error) {
	if len(opt.Addresses) == 0 {
		return nil, errors.New("clickhouse: no address")
	}
	if opt.User == "" {
		opt.User = "default"
	}
	if opt.Database == "" {
		opt.Database = "default"
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = 10 * time.Second
	}
	if opt.RetryBackoff == 0 {
		opt.RetryBackoff = 200 * time.Millisecond
	}
	settings := clickhouse.Settings{"async_insert": 0}
	for k, v := range opt.Settings {
		settings[k] = v
	}
	proto := clickhouse.Native
	if opt.HTTP {
		proto = clickhouse.HTTP
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Protocol:     proto,
		Addr:         opt.Addresses,
		Auth:         clickhouse.Auth{Database: opt.Database, Username: opt.User, Password: opt.Password},
		TLS:          opt.TLS,
		Settings:     settings,
		DialTimeout:  opt.DialTimeout,
		MaxOpenConns: 16,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse open: %s", redact(err.Error(), opt.Password))
	}
	c := &Client{opt: opt, conn: conn}
	if opt.HTTP {
		c.http = &http.Client{Transport: &http.Transport{TLSClientConfig: opt.TLS, MaxIdleConnsPerHost: 8}}
	}
	err = c.Retry(ctx, func(ctx context.Context) error { return conn.Ping(ctx) })
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("clickhouse ping %s: %s", c, redact(err.Error(), opt.Password))
	}
	return c, nil
}

// Conn returns the query connection (clickhouse-go).
func (c *Client) Conn() driver.Conn { return c.conn }

// Database returns the connection's default database.
func (c *Client) Database() string { return c.opt.Database }

// Close closes the query connection.
func (c *Client) Close() error {
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	return c.conn.Close()
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "******")
}

// IsConnError reports whether err is a transport failure worth retrying (refused,
// reset, closed, timed out), as opposed to an error the server returned.
func IsConnError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection refused", "connection reset", "broken pipe", "EOF", "use of closed network connection", "driver: bad connection", "acquire conn timeout"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Retry runs fn, retrying it up to MaxRetries times with exponential backoff while it
// fails with a connection error. fn must be safe to repeat.
func (c *Client) Retry(ctx context.Context, fn func(context.Context) error) error {
	backoff := c.opt.RetryBackoff
	for attempt := 0; ; attempt++ {
		err := fn(ctx)
		if err == nil || !IsConnError(err) || attempt >= c.opt.MaxRetries {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// Insert streams blocks into table: input holds the columns (names and types as the
// table has them); fill resets and refills them with the next block and returns false
// when there is none. One INSERT statement per call: native via ch-go, HTTP as a
// Native-format body. Setting async_insert=0 makes the rows visible on return.
// settings ("name = value") go into the statement's SETTINGS clause.
func (c *Client) Insert(ctx context.Context, table string, input proto.Input, fill func() (bool, error), settings ...string) error {
	names := make([]string, len(input))
	for i, col := range input {
		names[i] = "`" + strings.ReplaceAll(col.Name, "`", "``") + "`"
	}
	into := "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ")"
	if len(settings) > 0 {
		into += " SETTINGS " + strings.Join(settings, ", ")
	}
	if c.opt.HTTP {
		return c.insertHTTP(ctx, into+" FORMAT Native", input, fill)
	}
	return c.insertNative(ctx, into+" VALUES", input, fill)
}

func (c *Client) dialNative(ctx context.Context) (*ch.Client, error) {
	var last error
	for _, addr := range c.opt.Addresses {
		cl, err := ch.Dial(ctx, ch.Options{
			Address: addr, Database: c.opt.Database, User: c.opt.User, Password: c.opt.Password,
			TLS: c.opt.TLS, DialTimeout: c.opt.DialTimeout, ReadTimeout: 5 * time.Minute,
			ClientName: "goldbridge",
			Settings:   []ch.Setting{{Key: "async_insert", Value: "0", Important: false}},
		})
		if err == nil {
			return cl, nil
		}
		last = err
	}
	return nil, fmt.Errorf("clickhouse dial: %s", redact(last.Error(), c.opt.Password))
}

func (c *Client) insertNative(ctx context.Context, query string, input proto.Input, fill func() (bool, error)) error {
	ok, err := fill()
	if err != nil || !ok {
		return err
	}
	cl, err := c.dialNative(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	err = cl.Do(ctx, ch.Query{
		Body:  query,
		Input: input,
		OnInput: func(context.Context) error {
			ok, err := fill()
			if err != nil {
				return err
			}
			if !ok {
				return io.EOF
			}
			return nil
		},
	})
	if err != nil {
		return fmt.Errorf("insert: %s", redact(err.Error(), c.opt.Password))
	}
	return nil
}

func (c *Client) insertHTTP(ctx context.Context, query string, input proto.Input, fill func() (bool, error)) error {
	pr, pw := io.Pipe()
	go func() {
		var buf proto.Buffer
		for {
			ok, err := fill()
			if err != nil || !ok {
				_ = pw.CloseWithError(err)
				return
			}
			buf.Reset()
			rows := 0
			if len(input) > 0 {
				rows = input[0].Data.Rows()
			}
			if err := (proto.Block{Columns: len(input), Rows: rows}).EncodeRawBlock(&buf, 0, input); err != nil {
				_ = pw.CloseWithError(err)
				return
			}
			if _, err := pw.Write(buf.Buf); err != nil {
				return
			}
		}
	}()
	defer pr.Close()
	return c.httpDo(ctx, query, pr, io.Discard)
}

// httpDo sends one statement whose data is body and copies the answer to w.
func (c *Client) httpDo(ctx context.Context, query string, body io.Reader, w io.Writer) error {
	scheme := "http"
	if c.opt.TLS != nil {
		scheme = "https"
	}
	v := url.Values{"query": {query}, "database": {c.opt.Database}, "async_insert": {"0"}}
	for k, s := range c.opt.Settings {
		v.Set(k, s)
	}
	var last error
	for _, addr := range c.opt.Addresses {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+addr+"/?"+v.Encode(), body)
		if err != nil {
			return err
		}
		req.SetBasicAuth(c.opt.User, c.opt.Password)
		resp, err := c.http.Do(req)
		if err != nil {
			last = err
			continue
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return fmt.Errorf("insert: %s: %s", resp.Status, redact(string(bytes.TrimSpace(msg)), c.opt.Password))
		}
		_, err = io.Copy(w, resp.Body)
		return err
	}
	return fmt.Errorf("insert: %s", redact(last.Error(), c.opt.Password))
}
