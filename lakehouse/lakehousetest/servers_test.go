package lakehousetest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
)

// A start that fails because a port was taken in between is tried again on fresh ports,
// up to portTries in all; any other failure is returned at once.
func TestOnFreePortsRetriesTakenPorts(t *testing.T) {
	taken := takenPortError(t)
	other := errors.New("start postgres: exit status 1\ninitdb failed")
	for _, tc := range []struct {
		name  string
		fails []error // what the start returns on each call, then nil
		calls int
		err   error
	}{
		{"first start", nil, 1, nil},
		{"one taken port", []error{taken}, 2, nil},
		{"two taken ports", []error{taken, taken}, 3, nil},
		{"always taken", []error{taken, taken, taken, taken}, portTries, taken},
		{"another failure", []error{other, nil}, 1, other},
		{"taken then another", []error{taken, other}, 2, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			seen := map[string]bool{}
			err := onFreePorts(t, 3, func(ports []int) error {
				if len(ports) != 3 {
					t.Fatalf("got %d ports, want 3", len(ports))
				}
				seen[fmt.Sprint(ports)] = true
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if calls != tc.calls {
				t.Fatalf("%d starts, want %d", calls, tc.calls)
			}
			if len(seen) != calls {
				t.Fatalf("%d starts on %d port sets: a retry reused its ports", calls, len(seen))
			}
		})
	}
}

// takenPortError is the error a real second bind of a port gives, wrapped as a start's.
func takenPortError(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	if err == nil {
		t.Fatal("a second listener bound a bound port")
	}
	taken := fmt.Errorf("start seaweedfs: exit status 1\nweed exited during start\nF1207 s3.go:412] %w", err)
	if !portTaken(taken) {
		t.Fatalf("portTaken(%v) = false", taken)
	}
	if !portTaken(errors.New(`LOG:  could not bind IPv4 address "127.0.0.1": Address already in use`)) {
		t.Fatal("portTaken misses PostgreSQL's message")
	}
	return taken
}

// The real servers, started on a port another process holds, fail with an error portTaken
// recognizes, and start on fresh ports in the same directory afterwards.
func TestServersStartPastATakenPort(t *testing.T) {
	skipShort(t, "SeaweedFS and PostgreSQL")
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port

	t.Run("seaweedfs", func(t *testing.T) {
		waitSeaweedFS(t)
		s := newSeaweedFS(t)
		for i, what := range []string{"s3", "catalog", "master"} {
			ports := freePorts(t, 11)
			ports[i] = port
			if err := s.startOn(ports); err == nil || !portTaken(err) {
				t.Fatalf("weed started with its %s port taken: %v", what, err)
			}
		}
		if err := onFreePorts(t, 11, s.startOn); err != nil {
			t.Fatal(err)
		}
		s.waitBucket(t)
	})
	t.Run("postgres", func(t *testing.T) {
		if out, err := script("postgres.sh", nil, "installed"); err != nil {
			t.Fatalf("postgresql is not installed (run `make postgres`): %v\n%s", err, out)
		}
		p := newPostgres(t)
		p.Port = port
		if err := p.start(); err == nil || !portTaken(err) {
			t.Fatalf("postgres started with its port taken: %v", err)
		}
		p.Port = freePorts(t, 1)[0]
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	})
}
