package envoy

import (
	"math"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/yamlfile"
	"github.com/sluicerate/sluice/store"
)

// limitNodes is one rate_limit block as read: the limit so far, and the
// keys whose combination decides the rest, nil when absent.
type limitNodes struct {
	l                                              Limit
	unit, requests, multiplier, window, unlimitedN *yaml.Node
	unlimited                                      bool
}

// limitFields reads the keys of the rate_limit block v.
func (d *decoder) limitFields(v *yaml.Node) *limitNodes {
	f := &limitNodes{l: Limit{Multiplier: 1}}
	d.fields(v, "a rate_limit", limitKeys, func(k string, x *yaml.Node) {
		switch k {
		case "unit":
			f.unit = x
		case "requests_per_unit":
			f.requests = x
			f.l.Requests = uint32(d.integer(x, k, math.MaxUint32))
		case "unit_multiplier":
			f.multiplier = x
			f.l.Multiplier = uint32(d.integer(x, k, math.MaxUint32))
			if f.l.Multiplier == 0 {
				d.Errorf(x, "unit_multiplier is 0; use 1 or more (the window is that many units)")
			}
		case "window":
			f.window = x
			f.l.Window = d.duration(x, k)
		case "algorithm":
			a, err := sluice.ParseAlgorithm(d.str(x, k))
			if err != nil {
				d.Errorf(x, "unknown algorithm %q; use log (the default), gcra or sliding-counter", x.Value)
			}
			f.l.Algorithm = a
		case "budget":
			f.l.Budget = d.duration(x, k)
		case "name":
			f.l.Name = d.str(x, k)
		case "unlimited":
			f.unlimitedN = x
			f.unlimited = d.boolean(x, k)
		case "replaces":
			f.l.Replaces = d.replaces(x)
		}
	})
	return f
}

// duration reads key k's duration (a window, a budget): from 1µs to a year.
func (d *decoder) duration(x *yaml.Node, k string) time.Duration {
	if x.Kind != yaml.ScalarNode {
		d.str(x, k)
		return 0
	}
	w, err := yamlfile.Duration(x)
	switch {
	case err != nil:
		d.Errorf(x, "%s: %v", k, err)
	case w < time.Microsecond:
		d.Errorf(x, "%s: duration %q is shorter than 1µs; give one from 1µs to a year", k, x.Value)
	}
	return w
}

// replaces reads the names of a replaces list.
func (d *decoder) replaces(x *yaml.Node) []string {
	items, ok := d.mappings(x, "replaces is not a list; write \"replaces: [{name: NAME}]\"",
		"a replaces entry is not a mapping; write \"- name: NAME\"")
	if !ok {
		return nil
	}
	var names []string
	for _, item := range items {
		name := ""
		d.fields(item, "a replaces entry", []string{"name"}, func(_ string, nv *yaml.Node) { name = d.str(nv, "name") })
		if name == "" {
			d.Errorf(item, "a replaces entry has no name; name the rate_limit it replaces")
			continue
		}
		names = append(names, name)
	}
	return names
}

// limit loads one rate_limit block into n.
func (d *decoder) limit(n *node, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		d.Errorf(v, "rate_limit is not a mapping; write \"rate_limit: {unit: minute, requests_per_unit: 10}\"")
		return
	}
	f := d.limitFields(v)
	l := f.l
	for _, r := range l.Replaces {
		if r == l.Name && r != "" {
			d.Errorf(v, "rate_limit %q replaces itself; replaces names other limits", r)
		}
	}
	unit := rlsv3.RateLimitResponse_RateLimit_UNKNOWN
	if f.unit != nil {
		u, ok := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(d.str(f.unit, "unit"))]
		if !ok || u == 0 {
			d.Errorf(f.unit, "invalid rate limit unit %q; use second, minute, hour, day, week, month or year (or window: for any length)", f.unit.Value)
			return
		}
		unit = rlsv3.RateLimitResponse_RateLimit_Unit(u)
	}
	if f.unlimited {
		if f.unit != nil || f.window != nil || f.requests != nil {
			d.Errorf(f.unlimitedN, "an unlimited rate_limit has no unit, window or requests_per_unit; remove them or unlimited")
		}
		n.unlimited = true
		return
	}
	switch {
	case f.unit != nil && f.window != nil:
		d.Errorf(f.window, "a rate_limit has a unit and a window; keep one (unit with unit_multiplier, or window)")
		return
	case f.window != nil:
		if f.multiplier != nil {
			d.Errorf(f.multiplier, "unit_multiplier goes with unit, not window; write the whole length in window")
		}
		if l.Window < time.Microsecond {
			return
		}
		l.Unit, l.Multiplier = unitOf(l.Window)
	case f.unit != nil && d.opts.CalendarUnits && calendarUnits[unit] != store.NoPeriod:
		switch {
		case l.Multiplier > 1:
			d.Errorf(f.multiplier, "unit_multiplier %d with calendar units (SLUICE_CALENDAR_UNITS): a period is one calendar %s; remove unit_multiplier, or give window: for a sliding window", l.Multiplier, strings.ToLower(unit.String()))
			return
		case l.Algorithm != sluice.Log || l.Budget != 0:
			d.Errorf(v, "a calendar %s (SLUICE_CALENDAR_UNITS) counts per period: it takes no algorithm or budget; remove them, or give window: for a sliding window", strings.ToLower(unit.String()))
			return
		}
		cal := unitLimit(unit, l.Requests, true)
		l.Unit, l.Multiplier, l.Window, l.Period = cal.Unit, cal.Multiplier, cal.Window, cal.Period
	case f.unit != nil:
		l.Unit = unit
		l.Window = unitLengths[unit] * time.Duration(max(l.Multiplier, 1))
	default:
		d.Errorf(v, "a rate_limit has no unit; add \"unit: second\" (or minute, hour, day), or window: for any length")
		return
	}
	if l.Algorithm == sluice.GCRA && l.Requests > 0 && l.Window/time.Microsecond < time.Duration(l.Requests) {
		d.Errorf(v, "%d per %v is more than one request per µs, which gcra cannot hold; use the log", l.Requests, l.Window)
		return
	}
	if m := sluice.MaxBudget(l.Algorithm, int64(l.Requests), int64(l.Requests), l.Window); l.Requests > 0 && l.Budget > 0 && (l.Budget < sluice.MinBudget || l.Budget > m) {
		d.Errorf(v, "budget %v is not from %v to %v, a quarter of the window (of gcra's refill); give one within, or leave budget out", l.Budget, sluice.MinBudget, m)
		return
	}
	n.limits = append(n.limits, l)
}
