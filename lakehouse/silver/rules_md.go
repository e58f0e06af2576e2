package silver

// The rules registry as Markdown (`goldbridge rules`).

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// RulesMarkdown renders the rules registry of an entity as a Markdown table (id, kind,
// column, expression / lookup, reason), in registry order: the documentation of the
// transformations, printed by `goldbridge rules ENTITY`.
func RulesMarkdown(spec EntitySpec) string {
	rows := [][]string{{"id", "kind", "column", "expression / lookup", "reason"}}
	for _, r := range spec.Rules {
		var column, what string
		switch r.Kind {
		case "filter":
			what = rulesMDCode(r.Expr)
		case "normalize":
			column, what = r.Column, rulesMDCode(r.Expr)
			if r.Type != "" {
				column += " (→ " + r.Type + ")"
			}
		case "derive":
			column, what = r.Column+" ("+r.Type+")", rulesMDCode(r.Expr)
		case "lookup":
			if lk := r.Lookup; lk != nil {
				names := slices.Clone(lk.SilverNames())
				for i, c := range lk.Columns {
					if names[i] != c {
						names[i] += " = " + c
					}
				}
				column = strings.Join(names, ", ")
				src := "file " + rulesMDCode(lk.File)
				if lk.Entity != "" {
					src = "entity " + rulesMDCode(lk.Entity)
				}
				local, remote := lookupKeyColumns(*lk)
				on := make([]string, len(local))
				for i := range local {
					on[i] = rulesMDCode(local[i]) + " = " + rulesMDCode(remote[i])
				}
				what = "LEFT JOIN " + src + " ON " + strings.Join(on, " AND ")
			}
		default:
			column, what = r.Column, rulesMDCode(r.Expr)
		}
		rows = append(rows, []string{r.ID, r.Kind, column, what, r.Reason})
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			row[i] = rulesMDCell(cell)
			widths[i] = max(widths[i], utf8.RuneCountInString(row[i]), 3)
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		for i, cell := range cells {
			b.WriteString("| ")
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+1))
		}
		b.WriteString("|\n")
	}
	line(rows[0])
	sep := make([]string, len(widths))
	for i, w := range widths {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
	return b.String()
}

// rulesMDCode wraps s in a code span, with a double backtick fence when s holds a backtick.
func rulesMDCode(s string) string {
	if s == "" {
		return ""
	}
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// rulesMDCell makes s safe inside a table cell: one line, pipes escaped (also in code spans).
func rulesMDCell(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`).Replace(s)
}
