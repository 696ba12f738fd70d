package inspect

import (
	"fmt"
	"io"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// WriteText writes r, the Report of a policy's windows, as text for a
// terminal: the next request's answer, then each window with its entries,
// leases and slices. It returns the first error writing to out.
func WriteText(out io.Writer, r *Report) error {
	p := &printer{w: out}
	p.printf("policy %q on %s, server time %s\n", r.Policy, r.Store, r.Now.Format(time.RFC3339Nano))
	if len(r.Windows) == 0 {
		p.printf("no windows\n")
	}
	if n := r.Next; n != nil {
		retry := ms(n.RetryAfterMS)
		switch {
		case n.Allowed:
			p.printf("a request of cost 1 now: allowed\n")
		case n.Cause == string(sluice.CauseGap):
			p.printf("a request of cost 1 now: denied by rule %s, too soon after the last event; retry in %v\n", n.DeniedBy, retry)
		case n.Cause == string(sluice.CauseConcurrency):
			p.printf("a request of cost 1 now: denied by rule %s, all its leases are alive; retry in %v (when the earliest expires), sooner when one is released\n",
				n.DeniedBy, retry)
		default:
			p.printf("a request of cost 1 now: denied by rule %s, its window is full; retry in %v\n", n.DeniedBy, retry)
		}
	}
	for i := range r.Windows {
		p.window(&r.Windows[i])
	}
	return p.err
}

// printer writes text, keeping the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// ms is n milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// window writes w: a line of its figures and key, then its state, leases,
// slices and entries.
func (p *printer) window(w *Window) {
	ttl := "no key"
	switch {
	case w.TTLMS < 0:
		ttl = "no expiry"
	case w.TTLMS > 0:
		ttl = "expires in " + ms(w.TTLMS).String()
	}
	switch {
	case w.Leases != nil && w.Counted != nil:
		p.printf("\nrule %s: %d/%d leases alive (lease %v); %s\n  key %s\n", w.Rule, *w.Counted, w.Limit, ms(w.LeaseMS), ttl, w.Key)
	case w.Leases != nil:
		p.printf("\nrule %s: %d leases alive; %s\n  key %s\n", w.Rule, len(w.Leases), ttl, w.Key)
	case w.Counted != nil:
		p.printf("\nrule %s: %d/%d used per %v; %d entries; %s\n  key %s\n", w.Rule, *w.Counted, w.Limit, ms(w.WindowMS), len(w.Entries), ttl, w.Key)
	default:
		p.printf("\nrule %s: %d entries; %s\n  key %s\n", w.Rule, len(w.Entries), ttl, w.Key)
	}
	if n := len(w.Slices); n > 0 {
		var units int64
		for _, sl := range w.Slices {
			units += sl.Units
		}
		p.printf("  %d slices leased, %d units; key %s\n", n, units, w.SlicesKey)
	}
	switch len(w.State) {
	case 2:
		if w.Algorithm == store.Credits.String() {
			p.printf("  credits: balance %d, refilled last in period %d\n", w.State[0], w.State[1])
		} else {
			p.printf("  calendar: period %d counts %d\n", w.State[0], w.State[1])
		}
	case 1:
		p.printf("  gcra: the bucket is full again at %s\n", time.UnixMicro(w.State[0]).UTC().Format(time.RFC3339Nano))
	case 3:
		p.printf("  sliding counter: bucket %d holds %d, the previous one %d\n", w.State[0], w.State[2], w.State[1])
	}
	for _, l := range w.Leases {
		p.printf("  lease %s  expires in %v (at %s)\n", l.Token, ms(l.ExpiresInMS), l.Expires.Format(time.RFC3339Nano))
	}
	for _, sl := range w.Slices {
		when := "ends in " + ms(sl.EndsInMS).String()
		if sl.EndsInMS <= 0 {
			when = "ended " + ms(-sl.EndsInMS).String() + " ago"
		}
		p.printf("  slice of %d units  %s (at %s)\n", sl.Units, when, sl.Ends.Format(time.RFC3339Nano))
	}
	for j, e := range w.Entries {
		note := ""
		if e.Counts != nil && !*e.Counts {
			note = "  (outside the window; kept for the min gap)"
		}
		p.printf("  #%-4d age %-12v cost %d%s\n", j+1, ms(e.AgeMS).String(), e.Cost, note)
	}
}
