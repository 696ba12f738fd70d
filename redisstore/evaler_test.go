package redisstore

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
)

// stubEvaler answers with canned replies, to test what the store does with
// errors and malformed replies without a server. It records the calls.
type stubEvaler struct {
	sha     []error // errors EvalSHA returns, in turn
	reply   []int64
	calls   []string
	scripts []string
}

func (e *stubEvaler) EvalSHA(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	e.calls = append(e.calls, "EVALSHA")
	e.scripts = append(e.scripts, sha1)
	if len(e.sha) > 0 {
		err := e.sha[0]
		e.sha = e.sha[1:]
		if err != nil {
			return nil, err
		}
	}
	return e.reply, nil
}

func (e *stubEvaler) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	e.calls = append(e.calls, "EVAL")
	e.scripts = append(e.scripts, script)
	return e.reply, nil
}

var onePolicy = &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", Limit: 5, Window: time.Minute}}}

func decideWith(t *testing.T, ev Evaler) (sluice.Decision, error) {
	t.Helper()
	s, err := NewFromEvaler(ev, Config{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := resolve.Request(onePolicy, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return sluice.NewLimiter(s, sluice.Config{Timeout: -1, Breaker: sluice.Breaker{Failures: -1}}).Decide(context.Background(), req)
}

func TestNoScriptLoadsOnce(t *testing.T) {
	ev := &stubEvaler{sha: []error{errors.Join(ErrNoScript, errors.New("NOSCRIPT No matching script"))}, reply: []int64{1, 0, 60e6}}
	d, err := decideWith(t, ev)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Limits()[0].Used != 1 {
		t.Errorf("decision %+v, want allowed with used 1", d)
	}
	if got := strings.Join(ev.calls, " "); got != "EVALSHA EVAL" {
		t.Errorf("calls %q, want EVALSHA then EVAL", got)
	}
	if ev.scripts[0] != decideScripts.log.sha1 || ev.scripts[1] != decideScripts.log.src {
		t.Errorf("ran %.40q, want the log build of decide.lua: its SHA-1, then its source", ev.scripts)
	}
}

func TestLostReplyIsNotResent(t *testing.T) {
	for _, cause := range []error{io.ErrUnexpectedEOF, context.DeadlineExceeded, errors.New("ERR something")} {
		ev := &stubEvaler{sha: []error{cause}}
		_, err := decideWith(t, ev)
		if !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "redisstore: ") {
			t.Errorf("error %v, want one starting with redisstore: that wraps %v", err, cause)
		}
		if len(ev.calls) != 1 {
			t.Errorf("after %v: calls %q, want the script sent once", cause, ev.calls)
		}
	}
}

func TestMalformedReplies(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply []int64
	}{
		{"empty", nil},
		{"too short", []int64{1, 0}},
		{"too long", []int64{1, 0, 0, 7}},
		{"a concurrency status for a rate rule", []int64{1, 3, 0}},
		{"negative used", []int64{-1, 0, 0}},
		{"negative retry", []int64{1, -4, 0}},
		{"negative reset", []int64{1, 0, -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decideWith(t, &stubEvaler{reply: tt.reply})
			if err == nil || !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Fatalf("decision %+v, error %v: want an error starting with redisstore:", d, err)
			}
			if d.Allowed {
				t.Errorf("allowed on a malformed reply")
			}
		})
	}
}

// TestBuildFollowsAlgorithms checks that a request whose rules all keep the
// log runs the log's build of decide.lua, and one with a GCRA or sliding
// counter rule (in shadow mode or not) the build with every algorithm.
func TestBuildFollowsAlgorithms(t *testing.T) {
	for _, tc := range []struct {
		alg    sluice.Algorithm
		shadow bool
		want   *script
	}{
		{sluice.Log, false, decideScripts.log},
		{sluice.Log, true, decideScripts.log},
		{sluice.GCRA, false, decideScripts.all},
		{sluice.GCRA, true, decideScripts.all},
		{sluice.SlidingCounter, false, decideScripts.all},
		{sluice.SlidingCounter, true, decideScripts.all},
	} {
		p := &sluice.Policy{Name: "p", Rules: []sluice.Rule{
			{Name: "global", Limit: 5, Window: time.Minute},
			{Name: "r", Limit: 5, Window: time.Minute, Algorithm: tc.alg, Shadow: tc.shadow},
		}}
		req, err := resolve.Request(p, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		ev := &stubEvaler{reply: []int64{1, 0, 60e6, 1, 0, 60e6}}
		s, err := NewFromEvaler(ev, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sluice.NewLimiter(s, sluice.Config{Timeout: -1}).Decide(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if len(ev.scripts) != 1 || ev.scripts[0] != tc.want.sha1 {
			t.Errorf("%v (shadow %v): ran %q, want %s", tc.alg, tc.shadow, ev.scripts, tc.want.sha1)
		}
	}
	if decideScripts.log.sha1 == decideScripts.all.sha1 {
		t.Error("the two builds of decide.lua are one script")
	}
}
