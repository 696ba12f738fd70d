package edge

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge/edgetest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	fallback := memstore.New(memstore.Config{Clock: storetest.NewClock(storetest.T0).Now})
	t.Cleanup(func() { _ = fallback.Close() })
	shadow := newPolicy("shadow", 1)
	shadow.Shadow = true
	cases := []struct {
		name   string
		cfg    sluice.Config
		policy *sluice.Policy
		want   []Kind // of successive requests
		log    string
	}{
		{"fail closed", sluice.Config{}, newPolicy("p", 1), []Kind{Unavailable}, "allowed=false fallback=false"},
		{"fail open", sluice.Config{OnError: sluice.Allow}, newPolicy("p", 1), []Kind{Allowed}, "allowed=true fallback=false"},
		{"fallback store", sluice.Config{Fallback: fallback, Breaker: sluice.Breaker{Failures: -1}}, newPolicy("p", 1), []Kind{Allowed, Denied}, "fallback=true"},
		{"shadow", sluice.Config{}, shadow, []Kind{Allowed}, "allowed=true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			e := mustNew(t, sluice.NewLimiter(edgetest.FailingStore{}, c.cfg), &logs, c.policy)
			for i, want := range c.want {
				o := e.DecideAttrs(context.Background(), nil, Call{Cost: 1, Tag: slog.String("api", "test")})
				if o.Kind != want || !o.Decision().Degraded {
					t.Errorf("request %d: %+v, want %v and degraded", i, o, want)
				}
				if want == Unavailable && (o.Err == nil || o.Class() != (Class{http.StatusServiceUnavailable, "unavailable"})) {
					t.Errorf("request %d: err %v, class %+v; want the store's error, 503", i, o.Err, o.Class())
				}
			}
			line := `level=WARN msg="test: rate limiter store failed; failure policy applied" api=test policy=` + c.policy.Name
			if !strings.Contains(logs.String(), line) || !strings.Contains(logs.String(), c.log) || !strings.Contains(logs.String(), `err="redis: connection refused to 10.1.2.3:6379"`) {
				t.Errorf("logs %q, want %q with %s", logs.String(), line, c.log)
			}
		})
	}
}
