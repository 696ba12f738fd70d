package inspect

import (
	"context"
	"slices"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// Source is what the inspector reads: a Limiter, whose peek gives a rule's
// figures, and the Inspector of its store. The zero Inspector shows no
// store's windows or queues: a window is then its figures, with the slices
// the Limiter holds.
type Source struct {
	Limiter   *sluice.Limiter
	Inspector Inspector

	// Store names the store in a Report ("redis", "memory", a URL).
	Store string
}

// Policy inspects the windows of policy p for attrs: the decision of a
// peek of a request of cost 1 (nothing recorded; the store's figures, not
// the deny cache's) and, with an Inspector, each window as the store holds
// it, at the store's time (else at now). It returns an error for bad input
// (Limiter.Resolve's and Peek's); a store's failure is the Report's Error,
// with the failure policy's answer as Next.
func (s Source) Policy(ctx context.Context, p *sluice.Policy, attrs map[string]string, now time.Time) (Report, error) {
	req, err := s.Limiter.Resolve(p, attrs, 1)
	if err != nil {
		return Report{}, err
	}
	out := Report{Policy: p.Name, Store: s.Store, Now: now.UTC(), Windows: []Window{}}
	// The store's figures, not the deny cache's: a cached denial keeps the
	// figures the store gave when it denied, and the inspector shows the
	// windows as the store holds them now.
	storeOnly := *p
	storeOnly.CacheDenials = false
	d, err := s.Limiter.Peek(ctx, &storeOnly, attrs, 1)
	if _, bad := edge.Classify(err); bad {
		return Report{}, err
	} else if err != nil {
		out.Error = err.Error()
	}
	next := wire.NewDecisionJSON(&d)
	out.Next = &next
	var windows []StoredWindow
	if s.Inspector != nil && out.Error == "" {
		if windows, now, err = s.Inspector.Windows(ctx, req); err != nil {
			out.Error, windows = "reading the windows: "+err.Error(), nil
		} else {
			out.Now, out.EntriesShown = now.UTC(), true
		}
	}
	counted := out.Error == "" && peekCounted(req, &d)
	var held []sluice.SliceStatus
	if windows == nil {
		held = s.Limiter.Slices()
	}
	for i := range req.Checks {
		r := rule{check: &req.Checks[i], counted: counted}
		if j := slices.IndexFunc(d.Limits(), func(l sluice.LimitStatus) bool { return l.Rule == r.check.Rule }); j >= 0 {
			r.status = &d.Limits()[j]
		}
		if i < len(windows) {
			out.Windows = append(out.Windows, newWindow(r, &windows[i], windows[i].Slices, out.Now))
		} else {
			out.Windows = append(out.Windows, newWindow(r, nil, heldSlices(held, p.Name, r.check, out.Now), out.Now))
		}
	}
	return out, nil
}

// Stored is the Report of windows found without their policy's rules
// (sluice inspect without --config): each as the store holds it at now,
// in order.
func Stored(policy, storeName string, windows []StoredWindow, now time.Time) Report {
	out := Report{Policy: policy, Store: storeName, Now: now.UTC(), Windows: []Window{}, EntriesShown: true}
	for i := range windows {
		out.Windows = append(out.Windows, newWindow(rule{}, &windows[i], windows[i].Slices, now))
	}
	return out
}

// heldSlices returns the slices of held, those a Limiter holds, leased from
// the window of check c of policy, earliest end first.
func heldSlices(held []sluice.SliceStatus, policy string, c *store.Check, now time.Time) []StoredSlice {
	var list []StoredSlice
	for _, s := range held {
		if s.Policy == policy && s.Rule == c.Rule && slices.Equal(s.Values, c.Values) {
			list = append(list, StoredSlice{Units: s.Granted, Ends: now.Add(s.Left)})
		}
	}
	slices.SortFunc(list, func(a, b StoredSlice) int { return a.Ends.Compare(b.Ends) })
	return list
}

// peekCounted reports whether the figures of d, a peek of req, count the
// request it would admit (a dry run's do, store.Request.DryRun, and a
// concurrency rule's its lease): when every rule that is not shadow fits.
func peekCounted(req *store.Request, d *sluice.Decision) bool {
	for _, c := range req.Checks {
		for _, l := range d.Limits() {
			if l.Rule == c.Rule && l.Cause != "" && !c.Shadow {
				return false
			}
		}
	}
	return len(d.Limits()) > 0
}
