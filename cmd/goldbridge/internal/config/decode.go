package config

import (
	"encoding"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one configuration mistake, located by its path and line.
type Problem struct {
	Path string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", p.Path, p.Msg, p.Line)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Msg)
}

// Problems is every mistake found in a file; it is returned as the error of Load.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d problem(s) in config:\n  %s", len(ps), strings.Join(lines, "\n  "))
}

// decoder walks a YAML node tree into Go values, collecting every problem instead of
// stopping at the first: unknown keys, wrong types, unset environment variables.
type decoder struct {
	env      func(string) (string, bool)
	problems Problems
}

func (d *decoder) addf(path string, n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.problems = append(d.problems, Problem{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// nodeDecoder is a type that reads its own YAML node (a list or a mapping, say).
type nodeDecoder interface {
	decodeNode(d *decoder, path string, n *yaml.Node)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decode(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // leave the zero value; "required" checks report it
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(path, n, v.Elem())
		return
	}
	if nd, ok := v.Addr().Interface().(nodeDecoder); ok && v.CanAddr() {
		nd.decodeNode(d, path, n)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			d.addf(path, n, "expected a scalar value")
			return
		}
		s, ok := d.expand(path, n)
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			d.addf(path, n, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(path, n, v)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.addf(path, n, "expected a mapping, got %s", kindName(n))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(join(path, k.Value), val, elem)
			v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.addf(path, n, "expected a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(fmt.Sprintf("%s[%d]", path, i), item, s.Index(i))
		}
		v.Set(s)
	default:
		d.decodeScalar(path, n, v)
	}
}

func (d *decoder) decodeStruct(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.addf(path, n, "expected a mapping, got %s", kindName(n))
		return
	}
	fields := map[string][]int{}
	structFields(v.Type(), nil, fields)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		idx, ok := fields[k.Value]
		if !ok {
			msg := "unknown key"
			if s := closest(k.Value, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.addf(join(path, k.Value), k, "%s", msg)
			continue
		}
		d.decode(join(path, k.Value), val, v.FieldByIndex(idx))
	}
}

// structFields maps the YAML keys of struct type t to their field index paths; the
// keys of a field tagged ",inline" are the struct's own.
func structFields(t reflect.Type, at []int, fields map[string][]int) {
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		idx := append(slices.Clone(at), i)
		switch {
		case opts == "inline" && t.Field(i).Type.Kind() == reflect.Struct:
			structFields(t.Field(i).Type, idx, fields)
		case name != "" && name != "-":
			fields[name] = idx
		}
	}
}

func (d *decoder) decodeScalar(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.addf(path, n, "expected a %s, got %s", typeName(v.Type()), kindName(n))
		return
	}
	s, ok := d.expand(path, n)
	if !ok {
		return
	}
	// Re-resolve the expanded text as YAML would have resolved it literally, so that
	// "port: ${PORT}" decodes into an int; quoted scalars stay strings.
	tmp := &yaml.Node{Kind: yaml.ScalarNode, Value: s, Style: n.Style, Line: n.Line}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || v.Kind() == reflect.String {
		tmp.Tag = "!!str"
	}
	if err := tmp.Decode(v.Addr().Interface()); err != nil {
		if v.Type() == reflect.TypeFor[Secret]() {
			d.addf(path, n, "expected a string")
			return
		}
		d.addf(path, n, "expected a %s, got %q", typeName(v.Type()), s)
	}
}

// expand replaces ${VAR} and ${VAR:-default} in a scalar; "$$" is a literal "$".
// An unset variable without a default is a problem (never a silent empty string).
func (d *decoder) expand(path string, n *yaml.Node) (string, bool) {
	in := n.Value
	if !strings.Contains(in, "$") {
		return in, true
	}
	var b strings.Builder
	ok := true
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '$' || i+1 >= len(in) {
			b.WriteByte(c)
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '{':
		default:
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(in[i:], '}')
		if end < 0 {
			d.addf(path, n, "unterminated ${ in value")
			return "", false
		}
		expr := in[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			d.addf(path, n, "invalid variable name %q", name)
			ok = false
		} else if val, set := d.env(name); set {
			b.WriteString(val)
		} else if hasDef {
			b.WriteString(def)
		} else {
			d.addf(path, n, "environment variable %s is not set (use ${%s:-default} for an optional value)", name, name)
			ok = false
		}
		i += end
	}
	return b.String(), ok
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "list"
	default:
		return t.Kind().String()
	}
}

// closest suggests a known key within edit distance 2 of a misspelt one.
func closest[V any](key string, known map[string]V) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, k := range names {
		if dd := editDistance(key, k); dd < bestD {
			best, bestD = k, dd
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// osEnv looks a variable up in the process environment, with STATE_DIR overridden.
func osEnv(stateDir string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if name == "STATE_DIR" {
			return stateDir, true
		}
		return os.LookupEnv(name)
	}
}
