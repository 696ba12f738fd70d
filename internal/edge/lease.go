package edge

import (
	"context"
	"log/slog"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/outage"
)

// LeaseOp is what Finish does with a lease.
type LeaseOp uint8

const (
	// Release frees the lease's slots: sluice.Lease.Release.
	Release LeaseOp = iota

	// Settle records the real cost and frees the slots: Lease.Settle.
	Settle

	// Extend keeps the lease another lease time: Lease.Extend.
	Extend
)

// Finished is the answer to a release, settle or extension of a lease at
// the edge, for a protocol to render.
type Finished struct {
	// Kind is Allowed when the store answered; BadInput for an id that is
	// not a lease id or a bad cost (Err, which Classify knows);
	// Unavailable when the store failed (the lease may still be held).
	Kind Kind

	// Policy is the lease's policy; nil when there is none configured.
	Policy *sluice.Policy

	// Held reports whether the lease was alive: false for one released,
	// settled, expired, or of a policy no longer configured. Lease is the
	// lease, for its expiry after an extension.
	Held  bool
	Lease *sluice.Lease

	Err error
}

// Finish releases, settles (at cost) or extends the lease whose ID is id,
// taken by this server or another with the same configuration, reporting
// a store failure, or the store answering, to the outage reporter. A lease
// the fallback store took while the store failed (sluice.Lease.Degraded)
// is ended there, found only by the server that took it, and tells the
// reporter nothing.
func (s *Set[R]) Finish(ctx context.Context, id string, op LeaseOp, cost int64, c Call) Finished {
	name, err := sluice.LeasePolicy(id)
	if err != nil {
		return Finished{Kind: BadInput, Err: err}
	}
	e := s.edges[name]
	if e == nil {
		return Finished{Kind: Allowed} // a policy no longer configured holds nothing
	}
	p := e.policies[0].p
	x, err := s.lim.ResumeLease(p, id)
	if err != nil {
		return Finished{Kind: BadInput, Policy: p, Err: err}
	}
	var held bool
	switch op {
	case Settle:
		held, err = x.Settle(ctx, cost)
	case Extend:
		held, err = x.Extend(ctx)
	default:
		held, err = x.Release(ctx)
	}
	out := Finished{Kind: Allowed, Policy: p, Held: held, Lease: x, Err: err}
	switch _, bad := Classify(err); {
	case err == nil && x.Degraded():
		// The fallback store answered for a lease it took while the store
		// failed: nothing about the store.
	case err == nil:
		s.log.Outage.Answered(ctx)
	case bad:
		out.Kind = BadInput
	default:
		out.Kind = Unavailable
		if s.log.StoreFailed != "" {
			s.log.Outage.Failed(ctx, outage.Failure{Msg: s.log.StoreFailed, Tag: c.Tag, Kind: outage.Policy, Name: p.Name, Err: err,
				Attrs: []slog.Attr{slog.String("lease", "finish")}})
		}
	}
	return out
}
