package filescan

import "testing"

func TestLocalPath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"file:///var/wh/silver.db/orders/data/a.parquet", "/var/wh/silver.db/orders/data/a.parquet", true},
		{"file:///tmp/a%20b/x.parquet", "/tmp/a b/x.parquet", true},
		{"file://relative/a.parquet", "", false},
		{"s3://bucket/wh/a.parquet", "", false},
		{"/var/wh/a.parquet", "", false},
	} {
		got, ok := localPath(tc.in)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("localPath(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
