package edge

import (
	"context"
	"log/slog"
	"sync"

	"github.com/sluicerate/sluice"
)

// Hold is the leases a request holds while its handler runs (the
// middleware's Config.Lease), and the real cost the handler reports, with
// which End settles them. It is safe for concurrent use.
type Hold struct {
	edge   func(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr)
	leases []*sluice.Lease

	mu       sync.Mutex
	cost     int64
	reported bool
}

// Hold returns the leases of o (OpAcquire, Allowed) as a Hold, whose End
// the caller defers.
func (e *Edge[R]) Hold(o *Outcome, c Call) *Hold {
	return &Hold{leases: o.Leases, edge: func(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
		e.logAttrs(ctx, level, msg, c.Tag, attrs...)
	}}
}

// Report sets the real cost End settles the leases with.
func (h *Hold) Report(cost int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cost, h.reported = cost, true
}

// End settles the leases at the reported cost, or releases them when none
// was reported (the estimate stands). It uses ctx without its
// cancellation: the request's context may have ended with the handler. A
// lease that cannot be ended expires after its lease time.
func (h *Hold) End(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	h.mu.Lock()
	cost, reported := h.cost, h.reported
	h.mu.Unlock()
	for _, x := range h.leases {
		var err error
		if reported {
			_, err = x.Settle(ctx, cost)
		} else {
			_, err = x.Release(ctx)
		}
		if err != nil {
			h.edge(ctx, slog.LevelWarn, "ending a lease failed; it may be held until it expires", slog.Any("err", err), slog.Duration("lease", x.TTL()))
		}
	}
}

// holdKey is the context key of a request's Hold.
type holdKey struct{}

// WithHold returns ctx carrying h, for ReportCost.
func WithHold(ctx context.Context, h *Hold) context.Context {
	return context.WithValue(ctx, holdKey{}, h)
}

// ReportCost reports the real cost of the request whose context is ctx,
// to settle its leases with when its handler returns, and reports whether
// the request holds leases (the middleware was configured with Lease).
func ReportCost(ctx context.Context, cost int64) bool {
	h, ok := ctx.Value(holdKey{}).(*Hold)
	if ok {
		h.Report(cost)
	}
	return ok
}
