package catalog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

func TestIsConflict(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("disk full"), false},
		{context.Canceled, false},
		{ErrConflict, true},
		{table.ErrCommitFailed, true},
		{fmt.Errorf("commit: %w", table.ErrConflictingDataFiles), true},
		{table.ErrConflictingDeleteFiles, true},
		{table.ErrDataFilesMissing, true},
		{table.ErrCommitDiverged, true},
		{fmt.Errorf("%w: table ns.t metadata-location moved underneath us", table.ErrCommitFailed), true},
		{fmt.Errorf("%w: Requirement failed: branch main has changed", rest.ErrCommitFailed), true},
		{fmt.Errorf("%w: requirement failed: branch main has changed", rest.ErrCommitStateUnknown), false},
		{errors.New(`requirement failed: branch "main" has changed: expected id 1, found 2`), true},
		{errors.New(`requirement failed: branch "main" was created concurrently`), true},
		{errors.New("Requirement failed: current schema id has changed: expected 0, found 1"), true},
		{errors.New(`requirement failed: branch or tag "main" is missing, expected 3`), false},
		{errors.New("Requirement failed: table uuid does not match"), false},
	} {
		if got := IsConflict(tc.err); got != tc.want {
			t.Errorf("IsConflict(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for retry := 1; retry <= 40; retry++ {
		d := min(defaultRetry.base<<min(retry-1, 30), defaultRetry.max)
		for range 50 {
			got := defaultRetry.backoff(retry)
			if got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", retry, got, d/2, d)
			}
		}
	}
}

func TestCommitGivesUp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := Open(ctx, Config{URI: filepath.Join(dir, "c.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.EnsureNamespace(ctx, "ns"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.LoadOrCreateTable(ctx, "ns.t", iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true}), *iceberg.UnpartitionedSpec, nil); err != nil {
		t.Fatal(err)
	}
	l.retry = retryPolicy{attempts: 3, base: time.Millisecond, max: 2 * time.Millisecond}
	calls := 0
	_, err = l.Commit(ctx, "ns.t", func(context.Context, *table.Table) (*table.Table, error) {
		calls++

		return nil, errors.New(`requirement failed: branch "main" has changed: expected id 1, found 2`)
	})
	if calls != 3 || !errors.Is(err, ErrConflict) || !IsConflict(err) || !strings.Contains(err.Error(), "ns.t") {
		t.Fatalf("err = %v after %d calls; want ErrConflict naming ns.t after 3 calls", err, calls)
	}
	t.Logf("give-up error: %v", err)
}

func TestRedact(t *testing.T) {
	cfg := Config{
		URI:        "http://u:pa55word@host",
		S3:         S3Config{AccessKeyID: "AKIAXXXX", SecretAccessKey: "s3secret"},
		Properties: map[string]string{"credential": "id:clientsecret", "token": "bearertoken", "warehouse": "whname", "header.X-Api-Key-Secret": "hdrsecret"},
	}
	base := errors.New("x")
	err := redact(fmt.Errorf("p=pa55word s=s3secret c=id:clientsecret cs=clientsecret t=bearertoken h=hdrsecret w=whname: %w", base), secretValues(cfg))
	for _, s := range []string{"pa55word", "s3secret", "clientsecret", "bearertoken", "hdrsecret"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%q not redacted: %s", s, err)
		}
	}
	basic := redact(errors.New("auth=Basic dTpwYTU1d29yZA== q=pa%2F55"), secretValues(Config{URI: "http://u:pa55word@h", Properties: map[string]string{"token": "pa/55"}}))
	if strings.Contains(basic.Error(), "dTpwYTU1d29yZA") || strings.Contains(basic.Error(), "pa%2F55") {
		t.Errorf("encoded secrets not redacted: %v", basic)
	}
	if !strings.Contains(err.Error(), "w=whname") || !errors.Is(err, base) {
		t.Errorf("redaction too broad or chain lost: %v", err)
	}
	if redact(nil, secretValues(cfg)) != nil {
		t.Error("redact(nil) != nil")
	}
}
