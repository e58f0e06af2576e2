package chlocal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The server's access control, written by RunServer into the data directory before
// ClickHouse starts (docs/operations.md, "The embedded ClickHouse"):
//
//   - Options.User (the admin goldbridge itself uses) and every Options.Readers entry
//     log in with a password (SHA-256 in the file, never the password itself);
//   - "default" exists only because clickhouse-local's own session (the holding query)
//     logs in as default with an empty password (LocalConnection, hard-coded). It may
//     hold one session at a time (max_sessions_for_user = 1) and that session is the
//     holding query's, open for the whole life of the server, so every network login
//     as default is refused (USER_SESSION_LIMIT_EXCEEDED); it is granted only what the
//     holding query runs;
//   - nobody has a grant on sources (URL, S3, REMOTE, WRITE ON FILE, ...) or on table
//     engines outside the MergeTree family and Memory, and only the admin may read files
//     (goldbridge query reads the lake with icebergLocal); executable() looks in an empty
//     directory; an HTTP request with an Origin header (a browser's cross-origin request)
//     is answered 403;
//   - GET IdentityPath answers, without a login, the data directory and ports (ports.go).
const (
	// DefaultUser is the admin user goldbridge logs in as when Options.User is empty.
	DefaultUser = "goldbridge"
	// holderUser is the user of clickhouse-local's own session.
	holderUser = "default"

	configFile     = "goldbridge-config.xml"
	usersFile      = "goldbridge-users.xml"
	emptyScriptDir = "goldbridge-no-scripts"
)

// Reader is a read-only user of the embedded server (BI tools, Grafana): it may read
// the served database and nothing else.
type Reader struct {
	Name     string
	Password string
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// validateAccess checks the users of opt (defaults applied).
func validateAccess(opt Options) error {
	if opt.Password == "" {
		return errors.New("options: Password is required (the server has no passwordless user)")
	}
	seen := map[string]bool{holderUser: true}
	check := func(kind, name string) error {
		if !identRe.MatchString(name) {
			return fmt.Errorf("options: %s name %q is not an identifier", kind, name)
		}
		if seen[name] {
			return fmt.Errorf("options: %s name %q is taken (%q is clickhouse-local's own session)", kind, name, holderUser)
		}
		seen[name] = true
		return nil
	}
	if err := check("user", opt.User); err != nil {
		return err
	}
	for _, r := range opt.Readers {
		if err := check("reader", r.Name); err != nil {
			return err
		}
		if r.Password == "" {
			return fmt.Errorf("options: reader %s has no password", r.Name)
		}
	}
	if opt.Database != "" && !identRe.MatchString(opt.Database) {
		return fmt.Errorf("options: database %q is not an identifier", opt.Database)
	}
	return nil
}

// holderGrants are what the holding query needs; the holder user has nothing else.
var holderGrants = []string{"GRANT SYSTEM LISTEN ON *.*", "GRANT SELECT ON system.numbers"}

// adminGrants are the admin's rights: tables and views of any database (tests and the
// bench use several), and reading local files, which goldbridge query needs (its lake
// tables are icebergLocal(...) reads); never writing files, other sources (URL, S3,
// REMOTE, ...), dictionaries or other table engines.
var adminGrants = []string{
	"GRANT CREATE TEMPORARY TABLE ON *.*", "GRANT READ ON FILE",
	"GRANT SELECT, INSERT, ALTER, CREATE DATABASE, CREATE TABLE, CREATE VIEW, DROP DATABASE, DROP TABLE, DROP VIEW, TRUNCATE, OPTIMIZE, SHOW ON *.*",
	"GRANT TABLE ENGINE ON MergeTree", "GRANT TABLE ENGINE ON SummingMergeTree",
	"GRANT TABLE ENGINE ON AggregatingMergeTree", "GRANT TABLE ENGINE ON ReplacingMergeTree",
	"GRANT TABLE ENGINE ON Memory",
	"GRANT TABLE ENGINE ON Merge", // <t>_final (serving/ddl)
	"GRANT SELECT ON system.*",    // parts, columns, databases; processes for the stop
	"GRANT KILL QUERY ON *.*",     // the stop: KILL QUERY of the holding query
	// A forget deletes the data of tables dropped earlier now (push.Purge: UNDROP, then
	// DROP ... SYNC) instead of when the Atomic database gets to it.
	"GRANT UNDROP TABLE ON *.*",
	// The readers' queue (createReadersQueue).
	"GRANT CREATE RESOURCE, CREATE WORKLOAD ON *.*",
}

// readerGrants let a reader read the served database and see its metadata.
func readerGrants(db string) []string {
	on := "*.*"
	if db != "" {
		on = "`" + db + "`.*"
	}
	return []string{
		"GRANT SELECT, SHOW ON " + on,
		"GRANT SELECT ON system.one", "GRANT SELECT ON system.databases",
		"GRANT SELECT ON system.tables", "GRANT SELECT ON system.columns",
	}
}

// writeAccess writes the config and users files of opt into opt.Path (0600, atomically)
// and returns the config file's path.
func writeAccess(opt Options) (string, error) {
	scripts := filepath.Join(opt.Path, emptyScriptDir)
	if err := os.MkdirAll(scripts, 0o700); err != nil {
		return "", err
	}
	users := filepath.Join(opt.Path, usersFile)
	if err := writePrivate(users, []byte(usersXML(opt))); err != nil {
		return "", err
	}
	cfg := filepath.Join(opt.Path, configFile)
	var b strings.Builder
	b.WriteString("<clickhouse>\n")
	fmt.Fprintf(&b, "  <users_config>%s</users_config>\n", xmlText(users))
	fmt.Fprintf(&b, "  <user_scripts_path>%s/</user_scripts_path>\n", xmlText(scripts))
	if opt.PromptCleanup {
		b.WriteString(promptCleanupConfig)
	}
	if c := opt.Cluster; c != nil {
		// Every row a Distributed table reads comes from one node of each shard; the
		// nodes log in to each other as the admin (the file is 0600 in the data dir).
		fmt.Fprintf(&b, "  <remote_servers><%s>\n", c.Name)
		for _, nodes := range c.Shards {
			b.WriteString("    <shard><internal_replication>false</internal_replication>\n")
			for _, n := range nodes {
				host, port, _ := net.SplitHostPort(n) // validated
				fmt.Fprintf(&b, "      <replica><host>%s</host><port>%s</port><user>%s</user><password>%s</password></replica>\n",
					xmlText(host), xmlText(port), xmlText(opt.User), xmlText(opt.Password))
			}
			b.WriteString("    </shard>\n")
		}
		fmt.Fprintf(&b, "  </%s></remote_servers>\n", c.Name)
	}
	b.WriteString(`  <http_handlers>
    <rule>
      <headers><Origin>regex:.+</Origin></headers>
      <handler><type>static</type><status>403</status><response_content>cross-origin requests are refused</response_content></handler>
    </rule>
`)
	b.WriteString(identityHandler(identityOf(opt))) // ports.go: asked before any login
	b.WriteString(`    <defaults/>
  </http_handlers>
</clickhouse>
`)
	if err := writePrivate(cfg, []byte(b.String())); err != nil {
		return "", err
	}
	return cfg, nil
}

// The readers' queue. Dashboards ask many small questions at once; run all at once,
// 64 questions of ~5 ms on 2 cores share them so finely that a few wait on most of the
// others (the bench's p99 at 64 clients: ~2.8x its median). So the readers' queries
// run in a workload of their own (ClickHouse's query slot scheduling) that lets
// ReaderQueries of them run at once and the others wait for a slot in turn, at most
// maxWaitingReaderQueries of them (past that the server answers SERVER_OVERLOADED);
// the readers' profile pins the workload (a constraint), so a reader cannot leave the
// queue. goldbridge's own queries (the admin's) are in no workload: a push never waits
// behind dashboards, nor a reader's query behind a push.
//
// clickhouse-local neither loads <resources_and_workloads> from its config nor the
// definitions it stored under <path>/workload at its start, yet refuses to create
// them again while their files exist: so each start removes that directory
// (clearWorkloads; nobody else may create workloads on this server) and Start creates
// them anew over SQL as the admin once the server answers (createReadersQueue).
const (
	readersWorkload         = "goldbridge_readers"
	maxWaitingReaderQueries = 1000
	workloadDir             = "workload"
)

// DefaultReaderQueries is how many readers' queries run at once by default: two per
// core (on 2 cores, 4 served the bench's 64 clients as fast as 8 or no limit, and 2
// ~15% slower: a query waits on the network part of its time).
func DefaultReaderQueries() int { return 2 * runtime.NumCPU() }

// readersQueue is the SQL that creates the readers' workload.
func readersQueue(queries int) []string {
	return []string{
		"CREATE RESOURCE goldbridge_query_slots (QUERY)",
		"CREATE WORKLOAD goldbridge_all",
		fmt.Sprintf("CREATE WORKLOAD %s IN goldbridge_all SETTINGS max_concurrent_queries = %d, max_waiting_queries = %d",
			readersWorkload, queries, maxWaitingReaderQueries),
	}
}

// clearWorkloads removes the workload definitions a previous life of the server at
// path stored.
func clearWorkloads(path string) error {
	return os.RemoveAll(filepath.Join(path, workloadDir))
}

// The readers' bounds. A dashboard's query is one of the few inputs goldbridge does not
// write, and one bad panel (a cross join, a scan of numbers()) would otherwise hold a
// slot of the readers' queue for ever and could take the server's memory from the
// pushes. So each reader's query has a time limit (max_execution_time, failing with
// TIMEOUT_EXCEEDED: timeout_overflow_mode stays throw, never a silently cut answer) and
// a memory limit (max_memory_usage), which a reader may lower but neither raise nor lift
// (0): clickhouse-go sends max_execution_time with every query under a deadline (the
// time left + 5 s), Grafana's ClickHouse plugin its query timeout through it, so a
// read-only bound refused every such dashboard. At most ReaderQueries of them run at
// once, so the readers hold at most ReaderQueries × ReaderMemory. The served questions need far less: each of the bench's five runs
// within 16 MiB at 30M events (docs/serving.md).
const (
	// DefaultReaderTimeout is a reader's query time limit by default: above what
	// dashboards' clients send (Grafana's plugin: its 60 s query timeout + 5 s).
	DefaultReaderTimeout = 5 * time.Minute
	// DefaultReaderMemory is a reader's query memory limit by default (1 GiB).
	DefaultReaderMemory = int64(1 << 30)
	// MinReaderMemory is the least ReaderMemory, a floor against a size given in the
	// wrong unit (a query's read buffers alone take a few MB).
	MinReaderMemory = int64(64 << 20)
)

// usersXML is the server's users and profiles. The readers' profile turns off
// optimize_read_in_order: a dashboard's question over days ORDER BY the grain reads one
// small part per day, and merging 30 parts in key order cost more than sorting the 30
// rows read (the 30-day KPIs of the 10M bench: ~14 -> ~9 ms of server CPU,
// docs/serving.md); it puts the readers' queries in their queue, for good; and it sets
// the readers' bounds, for good too (opt has its defaults).
func usersXML(opt Options) string {
	var b strings.Builder
	seconds := strconv.FormatInt(int64(opt.ReaderTimeout/time.Second), 10)
	memory := strconv.FormatInt(opt.ReaderMemory, 10)
	b.WriteString(`<clickhouse>
  <profiles>
    <default></default>
    <holder><max_sessions_for_user>1</max_sessions_for_user></holder>
    <reader><readonly>2</readonly><optimize_read_in_order>0</optimize_read_in_order>
      <workload>` + readersWorkload + `</workload>
      <max_execution_time>` + seconds + `</max_execution_time><timeout_overflow_mode>throw</timeout_overflow_mode>
      <max_memory_usage>` + memory + `</max_memory_usage>
      <constraints><workload><readonly/></workload><timeout_overflow_mode><readonly/></timeout_overflow_mode>
        <max_execution_time><min>1</min><max>` + seconds + `</max></max_execution_time>
        <max_memory_usage><min>1</min><max>` + memory + `</max></max_memory_usage></constraints></reader>
  </profiles>
  <quotas><default></default></quotas>
  <users>
`)
	user := func(name, auth, profile string, grants []string) {
		fmt.Fprintf(&b, "    <%s>\n      %s\n", name, auth)
		b.WriteString("      <networks><ip>::1</ip><ip>127.0.0.1</ip></networks>\n")
		fmt.Fprintf(&b, "      <profile>%s</profile>\n      <quota>default</quota>\n      <grants>\n", profile)
		for _, g := range grants {
			fmt.Fprintf(&b, "        <query>%s</query>\n", xmlText(g))
		}
		fmt.Fprintf(&b, "      </grants>\n    </%s>\n", name)
	}
	user(holderUser, "<no_password/>", "holder", holderGrants)
	grants := adminGrants
	if opt.Cluster != nil {
		grants = append(slices.Clone(grants), "GRANT TABLE ENGINE ON Distributed")
	}
	user(opt.User, "<password_sha256_hex>"+sha256Hex(opt.Password)+"</password_sha256_hex>", "default", grants)
	for _, r := range opt.Readers {
		user(r.Name, "<password_sha256_hex>"+sha256Hex(r.Password)+"</password_sha256_hex>", "reader", readerGrants(opt.Database))
	}
	b.WriteString("  </users>\n</clickhouse>\n")
	return b.String()
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// writePrivate writes data to path with mode 0600 whatever the umask, through a
// temporary file renamed into place.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: no such file
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// EnsurePassword returns the password stored in file, first creating the file (mode
// 0600, its directory 0700 if missing) with a new random password if it does not exist.
// A file readable by group or others is made private again.
func EnsurePassword(file string) (string, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", fmt.Errorf("password file: %w", err)
		}
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return "", fmt.Errorf("password file: %w", err)
		}
		pw := hex.EncodeToString(raw)
		if err := writeNew(file, []byte(pw+"\n")); err != nil {
			if errors.Is(err, os.ErrExist) { // created meanwhile by another process
				return EnsurePassword(file)
			}
			return "", fmt.Errorf("password file: %w", err)
		}
		return pw, nil
	}
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(file, 0o600); err != nil {
			return "", fmt.Errorf("password file: %w", err)
		}
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", file)
	}
	return pw, nil
}

// writeNew creates path with data (mode 0600) unless it exists (os.ErrExist); the
// content appears complete or not at all (temporary file linked into place).
func writeNew(path string, data []byte) error {
	// A name of its own per call (not per process): two goroutines racing must not
	// remove each other's file before it is linked.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	if err := writePrivate(tmp, data); err != nil {
		return err
	}
	return os.Link(tmp, path)
}

// makePrivateDir creates dir (and missing parents) and makes dir itself 0700.
func makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
