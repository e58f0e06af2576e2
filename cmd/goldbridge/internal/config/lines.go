package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// lineIndex maps the config paths of a YAML tree, spelled as the decoder and Validate
// spell them (marts.kpi.measures[2].column), to the line of their key or list item.
type lineIndex map[string]int

// indexLines records the line of every path under n.
func indexLines(ix lineIndex, path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			indexLines(ix, path, c)
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			indexLines(ix, path, n.Alias)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := join(path, n.Content[i].Value)
			if _, dup := ix[k]; !dup {
				ix[k] = n.Content[i].Line
			}
			indexLines(ix, k, n.Content[i+1])
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			k := fmt.Sprintf("%s[%d]", path, i)
			ix[k] = item.Line
			indexLines(ix, k, item)
		}
	}
}

// line is the line of path, or of its nearest ancestor the file has (a required key
// that is missing is reported at its parent's line); 0 when none is in the file.
func (ix lineIndex) line(path string) int {
	for path != "" {
		if l, ok := ix[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}
