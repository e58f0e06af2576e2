package hot

import "testing"

// TestChangeString: a difference reads as what is missing, extra or of another type.
func TestChangeString(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want string
	}{
		{Change{Table: "t", Column: "x", Want: "Int64"}, "t.x missing (want Int64)"},
		{Change{Table: "t", Column: "x", Have: "Int64"}, "t.x Int64 not in the mart definition"},
		{Change{Table: "t", Column: "x", Want: "Int64", Have: "Int32"}, "t.x is Int32, want Int64"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
