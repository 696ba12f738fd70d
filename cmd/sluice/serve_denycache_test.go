package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/internal/wire"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// TestServeDenyCache: sluice serve caches denials by default, on Redis:
// a key over its limit is denied without a Redis call until it has room,
// and --deny-cache 0 turns that off.
func TestServeDenyCache(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	const policy = `
policies:
  - name: edge
    limits:
      - {name: per-ip, by: [ip], limit: 1, window: 1m}
`
	for _, tc := range []struct {
		name string
		args []string
		hits string
	}{
		{"default", nil, "sluice_deny_cache_hits_total 3"},
		{"off", []string{"--deny-cache", "0"}, "sluice_deny_cache_hits_total 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "deny-"+tc.name)+policy)
			p := startServe(t, file, tc.args...)
			var d struct {
				Allowed  bool
				DeniedBy string `json:"denied_by"`
			}
			for i := range 5 {
				p.post("/v1/decide", `{"policy":"edge","attributes":{"ip":"203.0.113.7"}}`, &d)
				if d.Allowed != (i == 0) || !d.Allowed && d.DeniedBy != "per-ip" {
					t.Fatalf("request %d: %+v", i+1, d)
				}
			}
			m := string(p.do("GET", "/metrics", "").Body)
			if !strings.Contains(m, tc.hits+"\n") || !strings.Contains(m, `sluice_decisions_total{outcome="denied",policy="edge",rule="per-ip"} 4`) {
				t.Errorf("/metrics lacks %q or the 4 denials:\n%s", tc.hits, m)
			}
		})
	}
	if code, _, errOut := runCLI(t, "serve", "--config", "x.yaml", "--deny-cache", "-1"); code != exitUsage || !strings.Contains(errOut, "--deny-cache -1") {
		t.Errorf("--deny-cache -1: %d %s", code, errOut)
	}
}

// wireDecision is a decision as the HTTP API and the gRPC service carry it.
type wireDecision = wire.DecisionJSON

func fromProto(d *sluicev1.Decision) wireDecision {
	w := wireDecision{Allowed: d.Allowed, Remaining: d.Remaining, RetryAfterMS: d.RetryAfterMs, ResetAfterMS: d.ResetAfterMs,
		DeniedBy: d.DeniedBy, Cause: d.Cause, Shadowed: d.Shadowed, Degraded: d.Degraded, Limits: []wire.LimitJSON{}}
	for _, l := range d.Limits {
		w.Limits = append(w.Limits, wire.LimitJSON{Name: l.Name, Limit: l.Limit, Used: l.Used, Remaining: l.Remaining,
			WindowMS: l.WindowMs, RetryAfterMS: l.RetryAfterMs, Cause: l.Cause})
	}
	return w
}

// sameShape describes how got, an answer, differs from want, the store's
// answer to the same request at about the same time: its waits may differ
// by the time between the two, slack; every other field is equal.
func sameShape(got, want wireDecision, slack time.Duration) string {
	near := func(a, b int64) bool { return max(a-b, b-a) <= slack.Milliseconds() }
	var diffs []string
	if !near(got.RetryAfterMS, want.RetryAfterMS) || !near(got.ResetAfterMS, want.ResetAfterMS) {
		diffs = append(diffs, fmt.Sprintf("waits %d/%d ms, the store's %d/%d", got.RetryAfterMS, got.ResetAfterMS, want.RetryAfterMS, want.ResetAfterMS))
	}
	if len(got.Limits) != len(want.Limits) {
		diffs = append(diffs, fmt.Sprintf("%d limits, the store's %d", len(got.Limits), len(want.Limits)))
	} else {
		for i := range got.Limits {
			g, w := got.Limits[i], want.Limits[i]
			if !near(g.RetryAfterMS, w.RetryAfterMS) {
				diffs = append(diffs, fmt.Sprintf("limit %d waits %d ms, the store's %d", i, g.RetryAfterMS, w.RetryAfterMS))
			}
			g.RetryAfterMS = w.RetryAfterMS
			if g != w {
				diffs = append(diffs, fmt.Sprintf("limit %d is %+v, the store's %+v", i, g, w))
			}
		}
	}
	got.RetryAfterMS, got.ResetAfterMS, got.Limits = want.RetryAfterMS, want.ResetAfterMS, want.Limits
	if !reflect.DeepEqual(got, want) {
		diffs = append(diffs, fmt.Sprintf("%+v, the store's %+v", got, want))
	}
	return strings.Join(diffs, "; ")
}

// TestServeDecisionShape: a decision has one shape whoever answered it.
// Two servers share one Redis, one with the deny cache (the default) and
// one without; a repeated denial answered from the cache, over every API
// (HTTP decide and peek, a batch of each, gRPC Decide and Peek), has the
// fields and the limits entries of the store's answer at that moment. The
// admin view's key inspector shows the windows as Redis holds them with
// the cache on, and a shadow denial has the documented shape.
func TestServeDecisionShape(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "shape")+`
policies:
  - name: notify
    limits:
      - {name: global, limit: 100, window: 30m}
      - {name: category, by: [category], limit: 3, window: 30m}
  - name: rollout
    limits:
      - {name: global, limit: 100, window: 30m}
      - {name: per-user, by: [user], limit: 1, window: 30m, shadow: true}
  - name: tenants
    limits:
      - name: per-user
        by: [user]
        limit: 10
        window: 1m
        overrides:
          - {match: {tenant: acme}, unlimited: true}
`)
	cached := startServe(t, file, "--admin", "127.0.0.1:0")
	direct := startServe(t, file, "--deny-cache", "0")
	const req = `{"policy":"notify","attributes":{"category":"errors"}}`
	for range 3 {
		var d wireDecision
		direct.post("/v1/decide", req, &d)
		if !d.Allowed {
			t.Fatalf("filling: %+v", d)
		}
	}
	// The store's answer now, from the server without a cache.
	storeAnswer := func() wireDecision {
		t.Helper()
		var d wireDecision
		direct.post("/v1/peek", req, &d)
		if d.Allowed || len(d.Limits) != 2 {
			t.Fatalf("the store's peek: %+v", d)
		}
		return d
	}
	hits := func() int {
		t.Helper()
		for _, line := range strings.Split(string(cached.do("GET", "/metrics", "").Body), "\n") {
			if v, ok := strings.CutPrefix(line, "sluice_deny_cache_hits_total "); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("no sluice_deny_cache_hits_total in /metrics")
		return 0
	}
	// fields returns the JSON members of a decision, in order.
	fields := func(body []byte) []string {
		t.Helper()
		dec := json.NewDecoder(bytes.NewReader(body))
		var keys []string
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("not an object: %s", body)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k.(string))
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		return keys
	}

	// The first denial comes from the store and fills the cache.
	first := cached.do("POST", "/v1/decide", req)
	var firstD wireDecision
	first.JSON(t, &firstD)
	want := storeAnswer()
	if diff := sameShape(firstD, want, 2*time.Second); diff != "" || hits() != 0 {
		t.Fatalf("the store's denial through the caching server: %s (hits %d)", diff, hits())
	}
	wantFields := fields(first.Body)

	conn, err := grpc.NewClient(cached.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := sluicev1.NewSluiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	grpcReq := &sluicev1.DecideRequest{Policy: "notify", Attributes: map[string]string{"category": "errors"}}

	http := func(path, body string) func() (wireDecision, []string) {
		return func() (wireDecision, []string) {
			r := cached.do("POST", path, body)
			if r.Status != 200 {
				t.Fatalf("POST %s = %d %s", path, r.Status, r.Body)
			}
			if strings.HasPrefix(body, "[") {
				var batch []struct {
					Status   int             `json:"status"`
					Decision json.RawMessage `json:"decision"`
				}
				r.JSON(t, &batch)
				if len(batch) != 1 || batch[0].Status != 200 {
					t.Fatalf("POST %s = %s", path, r.Body)
				}
				r.Body = batch[0].Decision
			}
			var d wireDecision
			r.JSON(t, &d)
			return d, fields(r.Body)
		}
	}
	grpcCall := func(call func(context.Context, *sluicev1.DecideRequest, ...grpc.CallOption) (*sluicev1.Decision, error)) func() (wireDecision, []string) {
		return func() (wireDecision, []string) {
			d, err := call(ctx, grpcReq)
			if err != nil {
				t.Fatal(err)
			}
			return fromProto(d), nil
		}
	}
	for _, api := range []struct {
		name string
		call func() (wireDecision, []string)
	}{
		{"HTTP decide", http("/v1/decide", req)},
		{"HTTP peek", http("/v1/peek", req)},
		{"HTTP batch decide", http("/v1/decide", "["+req+"]")},
		{"HTTP batch peek", http("/v1/peek", "["+req+"]")},
		{"gRPC Decide", grpcCall(sc.Decide)},
		{"gRPC Peek", grpcCall(sc.Peek)},
	} {
		before := hits()
		got, keys := api.call()
		want := storeAnswer()
		if after := hits(); after != before+1 {
			t.Errorf("%s: the deny cache's hits went from %d to %d; want it to answer", api.name, before, after)
		}
		if diff := sameShape(got, want, 2*time.Second); diff != "" {
			t.Errorf("%s, answered from the deny cache: %s", api.name, diff)
		}
		if keys != nil && !slices.Equal(keys, wantFields) {
			t.Errorf("%s: fields %v, the store's answer %v", api.name, keys, wantFields)
		}
	}

	// The inspector agrees with Redis: each window's used is the cost of
	// the entries Redis holds in its sorted set (a member per instant, its
	// running total, ":cost" after it when the cost is not 1; and the
	// epoch, "@…"), the cache's entry for the request notwithstanding.
	var insp struct {
		Next    wireDecision `json:"next"`
		Windows []struct {
			Rule string `json:"rule"`
			Key  string `json:"key"`
			Used int64  `json:"used"`
		} `json:"windows"`
	}
	res, err := httpClient.Post("http://"+cached.adminAddr()+"/api/v1/inspect", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := json.Unmarshal(body, &insp); err != nil || res.StatusCode != 200 || len(insp.Windows) != 2 {
		t.Fatalf("inspect = %d %s (%v)", res.StatusCode, body, err)
	}
	for _, w := range insp.Windows {
		members, err := rs.Do("ZRANGE", w.Key, "0", "-1")
		if err != nil {
			t.Fatal(err)
		}
		var held int64
		for _, m := range strings.Fields(members) {
			if strings.HasPrefix(m, "@") {
				continue
			}
			cost := int64(1)
			if _, c, ok := strings.Cut(m, ":"); ok {
				if cost, err = strconv.ParseInt(c, 10, 64); err != nil {
					t.Fatalf("member %q of %s", m, w.Key)
				}
			}
			held += cost
		}
		if w.Used != held || held != 3 {
			t.Errorf("inspector: rule %s used %d; Redis holds %d in %s (%q), want 3", w.Rule, w.Used, held, w.Key, members)
		}
	}
	if diff := sameShape(insp.Next, storeAnswer(), 2*time.Second); diff != "" {
		t.Errorf("inspector's next decision: %s", diff)
	}

	// A shadow denial: allowed, shadowed, the rule that would have denied
	// and its wait; the shadow rule's window counts the request.
	const rollout = `{"policy":"rollout","attributes":{"user":"ada"}}`
	var d wireDecision
	cached.post("/v1/decide", rollout, &d)
	cached.post("/v1/decide", rollout, &d)
	if !d.Allowed || !d.Shadowed || d.DeniedBy != "per-user" || d.Cause != "limit" || d.RetryAfterMS <= 0 ||
		len(d.Limits) != 2 || d.Limits[1].Used != 2 || d.Limits[1].Cause != "limit" || d.Limits[0].Cause != "" {
		t.Errorf("HTTP shadow denial: %+v", d)
	}
	g, err := sc.Decide(ctx, &sluicev1.DecideRequest{Policy: "rollout", Attributes: map[string]string{"user": "ada"}})
	if err != nil {
		t.Fatal(err)
	}
	if gd := fromProto(g); !gd.Allowed || !gd.Shadowed || gd.DeniedBy != "per-user" || len(gd.Limits) != 2 || gd.Limits[1].Used != 3 {
		t.Errorf("gRPC shadow denial: %+v", gd)
	}

	// An unlimited override: no limits, and a remaining that a JavaScript
	// client (whose numbers are float64) reads exactly.
	r := cached.do("POST", "/v1/decide", `{"policy":"tenants","attributes":{"user":"ada","tenant":"acme"}}`)
	var js map[string]any
	r.JSON(t, &js)
	if f, ok := js["remaining"].(float64); !ok || f != float64(sluice.UnlimitedRemaining) || int64(f) != sluice.UnlimitedRemaining ||
		!strings.Contains(string(r.Body), `"remaining":9007199254740991`) || !strings.Contains(string(r.Body), `"limits":[]`) {
		t.Errorf("unlimited: %s", r.Body)
	}
}
