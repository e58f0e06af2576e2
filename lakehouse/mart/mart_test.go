package mart

import (
	"fmt"
	"testing"
)

func TestLevels(t *testing.T) {
	dims := []string{"country", "category", "channel"}
	cases := []struct {
		grouping string
		sets     [][]string
		want     string // name<-from per level
	}{
		{"none", nil, "detail<-detail"},
		{"rollup", nil, "detail<-detail by_country_category<-detail by_country<-detail total<-detail"},
		{"cube", nil, "detail<-detail by_category_channel<-detail by_country_channel<-detail by_country_category<-detail by_channel<-detail by_category<-detail by_country<-detail total<-detail"},
		{"sets", [][]string{{"country"}, {}}, "by_country<-by_country total<-by_country"},
		{"sets", [][]string{{}}, "total<-total"},
		{"sets", [][]string{{"channel"}, {"country"}, {}, {"country", "channel"}}, "by_country_channel<-by_country_channel by_channel<-by_country_channel by_country<-by_country_channel total<-by_country_channel"},
		{"sets", [][]string{{"category"}, {"country"}, {}}, "by_category<-by_category by_country<-by_country total<-by_category"},
		{"sets", [][]string{{"category", "country"}, {"country", "category"}, {"country", "country"}}, "by_country_category<-by_country_category by_country<-by_country_category"},
	}
	for _, c := range cases {
		lv, err := Levels(c.grouping, dims, c.sets)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for i, l := range lv {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%s<-%s", l.Name, lv[l.From].Name)
		}
		if got != c.want {
			t.Errorf("%s %v:\n got %s\nwant %s", c.grouping, c.sets, got, c.want)
		}
	}
	if _, err := Levels("sets", dims, [][]string{{"nope"}}); err == nil {
		t.Error("unknown set dimension accepted")
	}
	if _, err := Levels("grid", dims, nil); err == nil {
		t.Error("unknown grouping accepted")
	}
}

func TestMask(t *testing.T) {
	l := Level{Keep: []int{0, 2}}
	if m := l.Mask(3); m != 0b010 {
		t.Fatalf("mask %b", m)
	}
}

func TestAggDescriptors(t *testing.T) {
	for _, a := range Aggs() {
		d, ok := a.Desc()
		if !ok || d.Agg != a {
			t.Fatalf("%s: no descriptor", a)
		}
		if (d.List == ListNone) != (a.ListCol("m") == "") {
			t.Errorf("%s: list column %q for list %d", a, a.ListCol("m"), d.List)
		}
		if d.Additive && d.Simple != "sum" {
			t.Errorf("%s: additive but merged with %q", a, d.Simple)
		}
		// A list is a list of doubles unless it holds the distinct keys of a count; an
		// average is no merged simple value.
		if d.List == ListValues && d.Result != ResultList || d.List == ListKeys && d.Result != ResultCount ||
			d.Result == ResultAverage && d.Simple != "" || d.Result == ResultList && d.List != ListValues {
			t.Errorf("%s: result %d with list %d, simple %q", a, d.Result, d.List, d.Simple)
		}
	}
	for _, c := range []struct {
		a, as Agg
		input Input
	}{{CountIf, Count, InputNone}, {SumIf, Sum, InputNumeric}, {AvgIf, Avg, InputNumeric}} {
		d, _ := c.a.Desc()
		as, _ := c.as.Desc()
		// Served as its plain aggregate: merged, checked and laid out as it is.
		if !c.a.Cond() || c.a.Served() != c.as || d.Input != c.input || d.Simple != as.Simple ||
			d.Additive != as.Additive || d.Checked != as.Checked || d.List != ListNone || d.Result != as.Result {
			t.Errorf("%s: descriptor %+v, served as %s", c.a, d, c.a.Served())
		}
	}
	for _, a := range Aggs() {
		if d, _ := a.Desc(); !d.Cond && (a.Cond() || a.Served() != a) {
			t.Errorf("%s: served as %s without a condition", a, a.Served())
		}
		if a.Served().Cond() {
			t.Errorf("%s: served as a conditional aggregate", a)
		}
	}
	if Agg("median").Valid() {
		t.Error("median is no aggregate")
	}
	if CountDistinct.ListCol("c") != "c__keys" || Quantiles.ListCol("q") != "q__values" || Sum.ListCol("s") != "" {
		t.Error("list columns")
	}
}
