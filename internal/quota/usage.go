package quota

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Usage is what a calendar quota counted for one key: the answer of GET
// /v1/usage, and what sluice usage prints.
type Usage struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`

	// Period is the quota's unit (day, week, month, year) and TimeZone
	// the IANA name of the zone its periods start in.
	Period   string `json:"period"`
	TimeZone string `json:"timezone"`

	// Limit is the quota's limit for the key now, runtime overrides
	// applied.
	Limit int64 `json:"limit"`

	// Periods are the current period first, then the ones the rule keeps
	// the totals of (its history), newest first, one per period whether
	// or not anything was counted in it.
	Periods []PeriodUsage `json:"periods"`
}

// PeriodUsage is one period of a Usage. Start and End are RFC 3339 in
// the quota's time zone: the period is [Start, End). Limit is the
// quota's limit now: the store keeps the totals of past periods, not the
// limits they had.
type PeriodUsage struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Used  int64     `json:"used"`
	Limit int64     `json:"limit"`
}

// Usage returns what the calendar quota named rule of p (an empty rule:
// p's only calendar quota) counted for the key attrs select, with the
// period that at falls in as the current one (the zero time: the store's
// now). attrs must hold the attributes that every rule of p is keyed by,
// as a decision's do: they choose the window.
func (s Source) Usage(ctx context.Context, p *sluice.Policy, rule string, attrs map[string]string, at time.Time) (Usage, error) {
	r, err := findRule(p, rule, "calendar quota", IsCalendar)
	if err != nil {
		return Usage{}, err
	}
	h, ok := s.Store.(store.Historian)
	if !ok {
		return Usage{}, fmt.Errorf("%w: reading the usage of policy %q rule %q", ErrNoStore, p.Name, r.Name)
	}
	req, err := s.Limiter.Resolve(p, attrs, 1)
	if err != nil {
		return Usage{}, err
	}
	ureq := store.UsageRequest{Policy: req.Policy, Shared: req.Shared}
	found := false
	for i := range req.Checks {
		if c := &req.Checks[i]; c.Rule == r.Name && c.Algorithm == store.Periodic {
			ureq.Check, found = *c, true
		}
	}
	if !found {
		return Usage{}, invalid("rule %q of policy %q does not apply to these attributes; give %q", r.Name, p.Name, r.By)
	}
	if !at.IsZero() {
		ureq.At = at.UnixMicro()
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(s.Timeout, DefaultTimeout))
	defer cancel()
	if err := h.Usage(ctx, &ureq); err != nil {
		return Usage{}, err
	}
	loc := location(r)
	u := Usage{Policy: p.Name, Rule: r.Name, Period: r.Period.String(), TimeZone: loc.String(), Limit: ureq.Check.Limit,
		Periods: make([]PeriodUsage, len(ureq.Periods))}
	for i, pu := range ureq.Periods {
		u.Periods[i] = PeriodUsage{Start: time.UnixMicro(pu.Start).In(loc), End: time.UnixMicro(pu.End).In(loc),
			Used: pu.Used, Limit: ureq.Check.Limit}
	}
	return u, nil
}

// CSVHeader is the header line of WriteCSV.
const CSVHeader = "period_start,period_end,used,limit"

// WriteCSV writes u's periods as CSV for a billing export: CSVHeader,
// then one line per period, newest first, times in RFC 3339 in the
// quota's time zone.
func (u *Usage) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"period_start", "period_end", "used", "limit"})
	for _, p := range u.Periods {
		_ = cw.Write([]string{p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339),
			strconv.FormatInt(p.Used, 10), strconv.FormatInt(p.Limit, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteText writes u for a person: what it is, then a table of its
// periods, newest first.
func (u *Usage) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "policy %s, rule %s: at most %d per %s (%s), %d periods\n", u.Policy, u.Rule, u.Limit, u.Period, u.TimeZone, len(u.Periods))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "start\tend\tused\tlimit\t")
	for _, p := range u.Periods {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t\n", p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339), p.Used, p.Limit)
	}
	return tw.Flush()
}
