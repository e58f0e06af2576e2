package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ExtraCheck is a validation that needs more than the config: the caller's, run on the
// decoded config after Validate (for example compiling the Silver rules as a run does).
type ExtraCheck func(*Config) Problems

// Load reads, expands, decodes, defaults and validates a pipeline file, then runs
// checks. ${STATE_DIR} in values is the absolute stateDir. The error, if any, is a
// Problems listing every mistake.
func Load(path, stateDir string, checks ...ExtraCheck) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, stateDir, nil, checks...)
}

// extraProblems runs checks on cfg and returns their problems except those at or below a
// path Validate already reported (found): a rule that does not parse, or a lookup that
// names no file, is one mistake, not a second one found by compiling the rule.
func extraProblems(found Problems, cfg *Config, checks []ExtraCheck) Problems {
	var out Problems
	for _, check := range checks {
		for _, p := range check(cfg) {
			if !coveredBy(found, p.Path) {
				out = append(out, p)
			}
		}
	}
	return out
}

// coveredBy tells whether a problem in ps is at path or inside it (path.key, path[i]).
func coveredBy(ps Problems, path string) bool {
	for _, p := range ps {
		rest, ok := strings.CutPrefix(p.Path, path)
		if ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// Parse is Load on bytes; env looks up ${VAR} (nil: the process environment).
func Parse(data []byte, stateDir string, env func(string) (string, bool), checks ...ExtraCheck) (*Config, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %q: %w", stateDir, err)
	}
	if env == nil {
		env = osEnv(abs)
	} else {
		inner := env
		env = func(name string) (string, bool) {
			if name == "STATE_DIR" {
				return abs, true
			}
			return inner(name)
		}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Problems{{Path: "(file)", Msg: "empty config"}}
		}
		return nil, Problems{{Path: "(file)", Msg: fmt.Sprintf("invalid YAML: %v", err)}}
	}
	cfg := &Config{}
	d := &decoder{env: env}
	d.decode("", &root, reflect.ValueOf(cfg).Elem())
	cfg.StateDir = abs
	cfg.applyDefaults()
	// Validate even after decoding problems so that one run reports every mistake; a value
	// that failed to decode is not reported a second time.
	ps := d.problems
	failed := map[string]bool{} // paths whose value did not decode
	for _, p := range ps {
		failed[p.Path] = true
	}
	more := cfg.Validate()
	more = append(more, extraProblems(more, cfg, checks)...)
	lines := lineIndex{}
	indexLines(lines, "", &root)
	// Every problem, each once, with the line of its path (or of its nearest ancestor in
	// the file).
	seen := map[Problem]bool{}
	for _, p := range more {
		if failed[p.Path] {
			continue
		}
		if p.Line == 0 {
			p.Line = lines.line(p.Path)
		}
		if !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return cfg, nil
}
