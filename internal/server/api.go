package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// DecisionJSON is a Decision as the HTTP API returns it (and sluice check
// --json prints it): durations in whole milliseconds, rounded up.
type DecisionJSON struct {
	Allowed      bool        `json:"allowed"`
	Remaining    int64       `json:"remaining"`
	RetryAfterMS int64       `json:"retry_after_ms"`
	ResetAfterMS int64       `json:"reset_after_ms"`
	DeniedBy     string      `json:"denied_by"`
	Cause        string      `json:"cause"`
	Shadowed     bool        `json:"shadowed,omitempty"`
	Degraded     bool        `json:"degraded"`
	Limits       []LimitJSON `json:"limits"`
}

// LimitJSON is one rule's status in a DecisionJSON.
type LimitJSON struct {
	Name         string `json:"name"`
	Limit        int64  `json:"limit"`
	Used         int64  `json:"used"`
	Remaining    int64  `json:"remaining"`
	WindowMS     int64  `json:"window_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Cause        string `json:"cause"`
}

// ms returns d in whole milliseconds, rounded up so that a client that waits
// that long never retries too early.
func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// NewDecisionJSON returns the JSON form of d.
func NewDecisionJSON(d *sluice.Decision) DecisionJSON {
	out := DecisionJSON{
		Allowed:      d.Allowed,
		Remaining:    d.Remaining,
		RetryAfterMS: ms(d.RetryAfter),
		ResetAfterMS: ms(d.ResetAfter),
		DeniedBy:     d.DeniedBy,
		Cause:        string(d.Cause),
		Shadowed:     d.Shadowed,
		Degraded:     d.Degraded,
		Limits:       make([]LimitJSON, len(d.Limits)),
	}
	for i, l := range d.Limits {
		out.Limits[i] = LimitJSON{Name: l.Rule, Limit: l.Limit, Used: l.Used, Remaining: l.Remaining,
			WindowMS: ms(l.Window), RetryAfterMS: ms(l.RetryAfter), Cause: string(l.Cause)}
	}
	return out
}

// writeJSON writes v as a 200 JSON response.
func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}.Write(w)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// fail answers a request of api with p.
func (s *Server) fail(w http.ResponseWriter, api string, p *httplimit.Problem) {
	s.metrics.requests.WithLabelValues(api, strconv.Itoa(p.Status)).Inc()
	p.Write(w)
}

// ok answers a request of api with the JSON v.
func (s *Server) ok(w http.ResponseWriter, api string, v any) {
	s.metrics.requests.WithLabelValues(api, "200").Inc()
	writeJSON(w, v)
}

// handleDecide serves /v1/decide, /v1/peek and /v1/record: one request, or
// a batch of them (batch.go). The body is decoded and the answer encoded by
// hand, in memory reused between requests (decide_request.go, answer.go).
func (s *Server) handleDecide(op edge.Op) http.HandlerFunc {
	api := op.String()
	answered := s.metrics.requests.WithLabelValues(api, "200")
	return func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		sc := getDecideScratch()
		defer putDecideScratch(sc)
		var p *httplimit.Problem
		if sc.body, p = readBodyInto(w, r, s.maxBody, sc.body[:0]); p != nil {
			s.failDecide(w, api, p, sc)
			return
		}
		if isBatch(sc.body) {
			s.decideBatch(w, r, st, op, api, sc)
			return
		}
		req, p := sc.parse(sc.body)
		if p != nil {
			s.failDecide(w, api, p, sc)
			return
		}
		o := st.policies.DecideAttrs(r.Context(), req.Policy, req.Attributes, call(api, op, costOf(req.Cost)))
		s.counted(op, &o)
		if p := outcomeProblem(&o); p != nil {
			s.failDecide(w, api, p, sc)
			return
		}
		answered.Inc()
		sc.out = append(appendDecision(sc.out[:0], &o.Decisions()[0]), '\n')
		writeDecision(w, sc.out)
	}
}

// failDecide answers a request of api with p, encoded in sc's buffer.
func (s *Server) failDecide(w http.ResponseWriter, api string, p *httplimit.Problem, sc *decideScratch) {
	s.metrics.requests.WithLabelValues(api, strconv.Itoa(p.Status)).Inc()
	sc.out = append(appendProblem(sc.out[:0], p), '\n')
	writeProblem(w, p, sc.out)
}

// call is what a request of api asks of the edge.
func call(api string, op edge.Op, cost int64) edge.Call {
	return edge.Call{Cost: cost, Op: op, Tag: slog.String("api", api)}
}

// counted counts the decision of o, unless it is a peek's.
func (s *Server) counted(op edge.Op, o *edge.Outcome) {
	if ds := o.Decisions(); op != edge.OpPeek && len(ds) > 0 && (o.Kind == edge.Allowed || o.Kind == edge.Denied || o.Kind == edge.Unavailable) {
		s.metrics.decision(o.Policy.Name, &ds[len(ds)-1])
	}
}

// policiesJSON is the answer of GET /v1/policies.
type policiesJSON struct {
	File      string         `json:"file"`
	LoadedAt  time.Time      `json:"loaded_at"`
	Policies  []policyJSON   `json:"policies"`
	Schedules []scheduleJSON `json:"schedules"`
}

type policyJSON struct {
	Name     string     `json:"name"`
	Penalize bool       `json:"penalize"`
	Shadow   bool       `json:"shadow"`
	Limits   []ruleJSON `json:"limits"`
}

// ruleJSON is a rule as GET /v1/policies and the admin view show it.
type ruleJSON struct {
	Name      string   `json:"name"`
	By        []string `json:"by"`
	Limit     int64    `json:"limit"`
	WindowMS  int64    `json:"window_ms"`
	MinGapMS  int64    `json:"min_gap_ms"`
	Algorithm string   `json:"algorithm"`
	Burst     int64    `json:"burst,omitempty"`
	Spread    int      `json:"spread,omitempty"`
	Optional  bool     `json:"optional"`
	Shadow    bool     `json:"shadow"` // the rule's or its policy's
}

func newRuleJSON(p *sluice.Policy, r *sluice.Rule) ruleJSON {
	return ruleJSON{Name: r.Name, By: nonNil(r.By), Limit: r.Limit, WindowMS: ms(r.Window), MinGapMS: ms(r.MinGap),
		Algorithm: r.Algorithm.String(), Burst: r.Burst, Spread: r.Spread, Optional: r.Optional, Shadow: r.Shadow || p.Shadow}
}

// newScheduleJSON is sc as GET /v1/policies and the admin view show it.
func newScheduleJSON(sc *sluice.Schedule) scheduleJSON {
	return scheduleJSON{Name: sc.Name, By: nonNil(sc.By), Rate: fmt.Sprintf("%d/%s", sc.Rate.Events, sc.Rate.Per),
		IntervalMS: float64(sc.Rate.Interval()) / float64(time.Millisecond), MaxDelayMS: ms(sc.MaxDelay), MaxQueue: sc.MaxQueue}
}

type scheduleJSON struct {
	Name       string   `json:"name"`
	By         []string `json:"by"`
	Rate       string   `json:"rate"`
	IntervalMS float64  `json:"interval_ms"`
	MaxDelayMS int64    `json:"max_delay_ms"`
	MaxQueue   int64    `json:"max_queue"`
}

func (s *Server) handlePolicies(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	out := policiesJSON{File: st.cfg.File, LoadedAt: st.loaded.UTC(), Policies: []policyJSON{}, Schedules: []scheduleJSON{}}
	for i := range st.cfg.Policies {
		p := &st.cfg.Policies[i]
		pj := policyJSON{Name: p.Name, Penalize: p.Penalize, Shadow: p.Shadow}
		for j := range p.Rules {
			pj.Limits = append(pj.Limits, newRuleJSON(p, &p.Rules[j]))
		}
		out.Policies = append(out.Policies, pj)
	}
	for i := range st.cfg.Schedules {
		out.Schedules = append(out.Schedules, newScheduleJSON(&st.cfg.Schedules[i]))
	}
	s.ok(w, "policies", out)
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	err := s.Ready(r.Context())
	s.store.observe("ping", start, err)
	if err != nil {
		s.log.Warn("readiness: the store does not answer", slog.Any("err", err))
		httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store does not answer"}.Write(w)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
}
