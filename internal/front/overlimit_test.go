package front

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicerate/sluice/store"
)

// TestOverLimit: every cost over a limit is counted; a key is logged once
// a minute, another key on its own; past overLimitKeys keys in a minute,
// the rest are counted and summed up in one line when the minute ends.
func TestOverLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	reg := prometheus.NewRegistry()
	o := NewOverLimit(reg, slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	check := func(user string) *store.Check {
		return &store.Check{Rule: "bytes", Values: []string{user}, Limit: 100_000, Window: time.Minute}
	}
	logged := func() int { return strings.Count(buf.String(), "a cost above the rule's limit was recorded") }

	for range 3 {
		o.Observe("upload", check("ann"), 10_000_000)
	}
	o.Observe("upload", check("bob"), 10_000_000)
	var m dto.Metric
	if err := o.total.WithLabelValues("upload", "bytes").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 4 {
		t.Errorf("sluice_over_limit_total = %v, want 4", got)
	}
	if logged() != 2 || !strings.Contains(buf.String(), `"values":["ann"],"cost":10000000,"limit":100000`) {
		t.Errorf("logged %d lines, want ann's and bob's once:\n%s", logged(), buf.String())
	}
	now = now.Add(59 * time.Second)
	o.Observe("upload", check("ann"), 10_000_000)
	if logged() != 2 {
		t.Errorf("ann again within the minute: %d lines, want 2", logged())
	}
	now = now.Add(time.Second)
	o.Observe("upload", check("ann"), 10_000_000)
	if logged() != 3 {
		t.Errorf("ann in the next minute: %d lines, want 3", logged())
	}

	// Many keys in one minute: memory and lines are bounded.
	buf.Reset()
	for i := range overLimitKeys + 500 {
		o.Observe("upload", check(fmt.Sprint("user-", i)), 10_000_000)
	}
	if len(o.logged) > overLimitKeys || logged() != overLimitKeys-1 { // ann was logged this minute
		t.Errorf("%d keys held and %d lines for %d keys; the bound is %d", len(o.logged), logged(), overLimitKeys+500, overLimitKeys)
	}
	now = now.Add(time.Minute)
	o.Observe("upload", check("ann"), 10_000_000)
	if !strings.Contains(buf.String(), `"keys_not_logged":501`) || len(o.logged) != 1 {
		t.Errorf("the next minute: %d keys held; want one, and a summary of the 501 keys not logged:\n%s", len(o.logged), buf.String()[max(0, buf.Len()-600):])
	}
}
