package serving

import (
	"fmt"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/gold"
)

// CheckGold reports whether the Gold table tbl was built for the definition m serves
// (m.Definition) and holds every served column with its served type; if not, the
// mart's definition changed since Gold last ran, and the error names the command to run.
// Nothing is served from a table that fails it.
func (m *Mart) CheckGold(tbl *table.Table) error {
	if m.Definition != "" {
		if what, known := gold.DefinitionChanges(tbl, m.Definition); known && what != "" {
			return fmt.Errorf("mart %s: the gold table was built for another definition (%s changed): run `goldbridge gold --marts %s` first", m.Name, what, m.Name)
		}
	}
	if err := m.CheckSchema(tbl.Schema()); err != nil {
		return fmt.Errorf("%w: run `goldbridge gold --marts %s` first", err, m.Name)
	}
	return nil
}
