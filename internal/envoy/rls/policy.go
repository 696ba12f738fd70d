package rls

import (
	"slices"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
)

// A request whose domain names a sluice policy (docs/server.md):
//
//   - the entries of all its descriptors together are the attributes (a key
//     given two different values is INVALID_ARGUMENT);
//   - hits_addend is the cost (0 means 1); a descriptor's own hits_addend
//     overrides it, and must then be the same on every descriptor that sets
//     one; a descriptor hits_addend of 0 checks without recording (a peek);
//   - the whole request is one decision of the policy: every rule fits and
//     the hit is recorded in all of them, or nothing is recorded anywhere.

// policyRequest reads a request of sluice's own model: the attributes of
// all its descriptors together, what deciding does and its cost.
func policyRequest(req *rlsv3.RateLimitRequest) (map[string]string, edge.Op, int64, error) {
	if req.GetDomain() == "" {
		return nil, 0, 0, status.Error(codes.InvalidArgument, "the request has no domain; the domain names the sluice policy")
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return nil, 0, 0, status.Error(codes.InvalidArgument, "the request has no descriptors")
	}
	attrs := make(map[string]string)
	cost := int64(max(req.GetHitsAddend(), 1))
	var (
		override    uint64 // the descriptors' hits_addend, when hasOverride
		hasOverride bool
	)
	for i, d := range descs {
		if d.GetIsNegativeHits() {
			return nil, 0, 0, status.Errorf(codes.InvalidArgument, "descriptor %d: negative hits are not supported", i)
		}
		if h := d.GetHitsAddend(); h != nil {
			v := h.GetValue()
			if hasOverride && override != v {
				return nil, 0, 0, status.Errorf(codes.InvalidArgument, "descriptors set different hits_addend (%d and %d); a request is one decision with one cost", override, v)
			}
			override, hasOverride = v, true
		}
		for _, en := range d.GetEntries() {
			if old, ok := attrs[en.GetKey()]; ok && old != en.GetValue() {
				return nil, 0, 0, status.Errorf(codes.InvalidArgument, "entry %q has two values, %q and %q; a request's descriptors give each attribute one value",
					en.GetKey(), old, en.GetValue())
			}
			attrs[en.GetKey()] = en.GetValue()
		}
	}
	switch {
	case !hasOverride:
		return attrs, edge.OpDecide, cost, nil
	case override == 0:
		return attrs, edge.OpPeek, 1, nil
	case override > sluice.MaxCost:
		return nil, 0, 0, status.Errorf(codes.InvalidArgument, "hits_addend is %d; hits are 0 to 2^53 (%d)", override, uint64(sluice.MaxCost))
	}
	return attrs, edge.OpDecide, int64(override), nil
}

// policyResponse answers the descriptors with the decision d of pol, in
// Envoy's one builder (decide.Status, decide.Respond): each descriptor
// reports the rules keyed by attributes it carries (a rule without
// attributes belongs to every descriptor); the overall code is OVER_LIMIT
// when d denies; the RateLimit headers are d's.
func policyResponse(pol *sluice.Policy, descs []*ratelimitv3.RateLimitDescriptor, d *sluice.Decision) *rlsv3.RateLimitResponse {
	statuses := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))
	var buf [4]decide.Window
	ws := buf[:0]
	for i, desc := range descs {
		if d.Degraded && len(d.Limits()) == 0 {
			// The failure policy decided: nothing is known of the rules.
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			if !d.Allowed {
				statuses[i].Code = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			continue
		}
		ws = ws[:0]
		for j := range d.Limits() {
			l := &d.Limits()[j]
			// The statuses are those of the rules that applied, in order.
			r := slices.IndexFunc(pol.Rules, func(r sluice.Rule) bool { return r.Name == l.Rule })
			if r >= 0 && keyedBy(pol.Rules[r].By, desc.GetEntries()) {
				ws = append(ws, decide.Window{Limit: envoy.RuleLimit(l), Known: true, Fits: l.Fits, Remaining: l.Remaining,
					Retry: l.RetryAfter, Reset: l.ResetAfter})
			}
		}
		statuses[i], _, _ = decide.Status(ws, d.Shadowed)
	}
	return decide.Respond(statuses, !d.Allowed, d, decide.Options{Headers: decide.Headers{RateLimit: true}})
}

// keyedBy reports whether every attribute in by is a key of entries.
func keyedBy(by []string, entries []*ratelimitv3.RateLimitDescriptor_Entry) bool {
	for _, a := range by {
		if !slices.ContainsFunc(entries, func(e *ratelimitv3.RateLimitDescriptor_Entry) bool { return e.GetKey() == a }) {
			return false
		}
	}
	return true
}
