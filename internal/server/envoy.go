package server

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// envoyService implements Envoy's envoy.service.ratelimit.v3.RateLimitService.
// A request whose domain the Envoy model serves (LoadEnvoyConfig) is decided
// by its descriptors (package envoy). Otherwise sluice's own model applies:
//
//   - the request's domain names the policy;
//   - the entries of all its descriptors together are the attributes (a key
//     given two different values is INVALID_ARGUMENT);
//   - hits_addend is the cost (0 means 1); a descriptor's own hits_addend
//     overrides it, and must then be the same on every descriptor that sets
//     one; a descriptor hits_addend of 0 checks without recording (a peek);
//   - the whole request is one decision of the policy: every rule fits and
//     the hit is recorded in all of them, or nothing is recorded anywhere.
//
// Each descriptor's status reports the rules keyed by attributes it
// carries (a rule without attributes belongs to every descriptor): OVER_LIMIT
// when one of them does not fit, and the tightest of them as current_limit.
// The overall code is OVER_LIMIT when the decision denies. The RateLimit
// and Retry-After headers of the decision are returned for Envoy to add to
// the response.
type envoyService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Server
}

func (s *Server) registerEnvoy(gs *grpc.Server) {
	rlsv3.RegisterRateLimitServiceServer(gs, &envoyService{s: s})
}

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
func (e *envoyService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (out *rlsv3.RateLimitResponse, err error) {
	defer func() { e.s.count("envoy", err) }()
	if err := checkEnvoyText(req); err != nil {
		return nil, err
	}
	st := e.s.state.Load()
	if cfg, ok := e.s.envoyDomain(st, req.GetDomain()); ok {
		return e.s.decideEnvoy(ctx, st, cfg, req)
	}
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "the request has no domain; the domain names the sluice policy")
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the request has no descriptors")
	}
	attrs := make(map[string]string)
	cost := int64(req.GetHitsAddend())
	if cost == 0 {
		cost = 1
	}
	op := edge.OpDecide
	var override *uint64
	for i, d := range descs {
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: negative hits are not supported", i)
		}
		if h := d.GetHitsAddend(); h != nil {
			v := h.GetValue()
			if override != nil && *override != v {
				return nil, status.Errorf(codes.InvalidArgument, "descriptors set different hits_addend (%d and %d); a request is one decision with one cost", *override, v)
			}
			override = &v
		}
		for _, en := range d.GetEntries() {
			if old, ok := attrs[en.GetKey()]; ok && old != en.GetValue() {
				return nil, status.Errorf(codes.InvalidArgument, "entry %q has two values, %q and %q; a request's descriptors give each attribute one value",
					en.GetKey(), old, en.GetValue())
			}
			attrs[en.GetKey()] = en.GetValue()
		}
	}
	if override != nil {
		if *override == 0 {
			op, cost = edge.OpPeek, 1
		} else if *override > math.MaxInt64 {
			return nil, status.Error(codes.InvalidArgument, "hits_addend is too large")
		} else {
			cost = int64(*override)
		}
	}
	o := st.policies.DecideAttrs(ctx, req.GetDomain(), attrs, call("envoy", op, cost))
	e.s.counted(op, &o)
	if p := outcomeProblem(&o); p != nil {
		return nil, grpcError(p)
	}
	pol, d := o.Policy, o.Decision()
	out = &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	if !d.Allowed {
		out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	for _, desc := range descs {
		out.Statuses = append(out.Statuses, descriptorStatus(pol, desc.GetEntries(), &d))
	}
	h := http.Header{}
	httplimit.WriteHeaders(h, d, httplimit.HeaderOptions{})
	for k, vs := range h {
		for _, v := range vs {
			// Envoy speaks HTTP/2 upstream, where header names are lower case.
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: strings.ToLower(k), Value: v})
		}
	}
	slices.SortFunc(out.ResponseHeadersToAdd, func(a, b *corev3.HeaderValue) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out, nil
}

// descriptorStatus reports the rules of pol keyed by the descriptor's
// entries.
func descriptorStatus(pol *sluice.Policy, entries []*ratelimitv3.RateLimitDescriptor_Entry, d *sluice.Decision) *rlsv3.RateLimitResponse_DescriptorStatus {
	ds := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if d.Degraded && len(d.Limits) == 0 {
		if !d.Allowed {
			ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		return ds
	}
	var tightest *sluice.LimitStatus
	for i := range d.Limits {
		l := &d.Limits[i]
		// The statuses are those of the rules that applied, in order.
		j := slices.IndexFunc(pol.Rules, func(r sluice.Rule) bool { return r.Name == l.Rule })
		if j < 0 || !keyedBy(pol.Rules[j].By, entries) {
			continue
		}
		if !l.Fits && !d.Shadowed {
			ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if tightest == nil || l.Remaining < tightest.Remaining {
			tightest = l
		}
	}
	if tightest != nil {
		ds.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{
			Name:            tightest.Rule,
			RequestsPerUnit: clampUint32(tightest.Limit),
			Unit:            unitOf(tightest.Window),
		}
		ds.LimitRemaining = clampUint32(tightest.Remaining)
		ds.DurationUntilReset = durationpb.New(tightest.ResetAfter)
	}
	return ds
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

func clampUint32(v int64) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32))
}

// unitOf is Envoy's unit for a window of exactly one second, minute, hour,
// day or week, and UNKNOWN for any other window (the rule's name and
// duration_until_reset still say what it is).
func unitOf(w time.Duration) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch w {
	case time.Second:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case time.Minute:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case 24 * time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case 7 * 24 * time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}
