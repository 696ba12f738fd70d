package overrides

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
)

// table is a set of overrides compiled for lookup: per rule, the overrides
// of exact values in a map, and the patterns, most specific first. It is
// never changed once built.
type table struct {
	rules map[ruleKey]*ruleTable
}

// ruleTable is one rule's overrides.
type ruleTable struct {
	exact    map[string]*entry // by exactKey of the values
	patterns []*entry          // most specific first
}

// entry is one override, compiled.
type entry struct {
	values  []string // as given: exact, or a prefix and '*'
	fig     sluice.Override
	until   time.Time // zero: none
	exact   int       // how many values are exact
	literal int       // the bytes of the values, '*' left out
	id      string
}

// newTable compiles the overrides os, which apply.
func newTable(os []*Override) *table {
	t := &table{rules: map[ruleKey]*ruleTable{}}
	for _, o := range os {
		k := ruleKey{o.PolicyOf(), o.Rule}
		rt := t.rules[k]
		if rt == nil {
			rt = &ruleTable{exact: map[string]*entry{}}
			t.rules[k] = rt
		}
		e := &entry{values: o.Values, id: o.ID, fig: sluice.Override{Limit: *o.Limit, Window: time.Duration(o.Window),
			Burst: o.Burst, MinGap: time.Duration(o.MinGap)}}
		if o.Until != nil {
			e.until = *o.Until
		}
		for _, v := range o.Values {
			if p, wild := strings.CutSuffix(v, "*"); wild {
				e.literal += len(p)
			} else {
				e.exact++
				e.literal += len(v)
			}
		}
		if e.exact == len(e.values) {
			rt.exact[string(exactKey(nil, o.Values))] = e
		} else {
			rt.patterns = append(rt.patterns, e)
		}
	}
	for _, rt := range t.rules {
		slices.SortFunc(rt.patterns, func(a, b *entry) int {
			if c := cmp.Compare(b.exact, a.exact); c != 0 {
				return c
			}
			if c := cmp.Compare(b.literal, a.literal); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
	}
	return t
}

// exactKey appends the map key of values to buf: each value's length,
// then its bytes, so that no two lists of values share one.
func exactKey(buf []byte, values []string) []byte {
	for _, v := range values {
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	return buf
}

// lookup returns the override of the window of rule of policy with values
// at the time now returns (read only when an override that matches ends),
// and whether one applies.
func (t *table) lookup(policy, rule string, values []string, now func() time.Time) (sluice.Override, bool) {
	rt := t.rules[ruleKey{policy, rule}]
	if rt == nil {
		return sluice.Override{}, false
	}
	live := func(e *entry) bool { return e.until.IsZero() || now().Before(e.until) }
	if len(rt.exact) > 0 {
		var room [128]byte
		if e := rt.exact[string(exactKey(room[:0], values))]; e != nil && live(e) {
			return e.fig, true
		}
	}
	for _, e := range rt.patterns {
		if matches(e.values, values) && live(e) {
			return e.fig, true
		}
	}
	return sluice.Override{}, false
}

// matches reports whether values match patterns, one for one.
func matches(patterns, values []string) bool {
	if len(patterns) != len(values) {
		return false
	}
	for i, p := range patterns {
		if prefix, wild := strings.CutSuffix(p, "*"); wild {
			if !strings.HasPrefix(values[i], prefix) {
				return false
			}
		} else if values[i] != p {
			return false
		}
	}
	return true
}
