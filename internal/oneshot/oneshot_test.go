package oneshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/oneshot"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const configFile = `policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 2, window: 1m}
      - {name: global, limit: 5000, window: 1h, algorithm: gcra, burst: 50}
      - {name: blocked, by: [tier], limit: 0, window: 1m, match: {tier: banned}}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 1s}
  - {name: short, by: [carrier], rate: 4/s, max_delay: 10s, max_queue: 2}
`

func parse(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse("sluice.yaml", []byte(configFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPeek: a peek records nothing, so the same request is allowed again;
// after the user's two requests it is denied by per-user, and the text
// names the rule, the figures of each limit (the gcra rule has drained in
// the 15s since) and when to retry; a limit of
// 0 is blocked.
func TestPeek(t *testing.T) {
	t.Parallel()
	ctx, cfg := context.Background(), parse(t)
	c := storetest.NewClock(t0)
	st := memstore.New(memstore.Config{Clock: c.Now})
	p, _ := cfg.FindPolicy("api")
	user := map[string]string{"user": "ann", "tier": "free"}
	for range 2 {
		pk, err := oneshot.PeekPolicy(ctx, st, "memory", cfg, p, user, 1)
		if err != nil || !pk.Allowed() {
			t.Fatalf("peek of a fresh window: %+v, %v; want allowed", pk, err)
		}
	}
	lim := sluice.NewLimiter(st, sluice.Config{})
	for range 2 {
		if _, err := lim.Allow(ctx, p, user); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(15 * time.Second)
	pk, err := oneshot.PeekPolicy(ctx, st, "memory", cfg, p, user, 1)
	if err != nil || pk.Allowed() {
		t.Fatalf("peek after two requests: %+v, %v; want denied", pk, err)
	}
	var out bytes.Buffer
	pk.WriteText(&out)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], `policy "api" on memory: denied by per-user (`) || !strings.HasSuffix(lines[0], "; cost 1, remaining 0)") ||
		!strings.HasPrefix(lines[1], "  per-user         2/2 used per 1m0s  does not fit (") || !strings.HasSuffix(lines[1], "); retry in 45s") ||
		lines[2] != "  global           0 of a burst of 50 used (gcra, 5000 per 1h0m0s)" {
		t.Errorf("text:\n%s", out.String())
	}
	b, _ := json.Marshal(pk)
	var got struct {
		Policy, Store string
		Allowed       bool
		DeniedBy      string `json:"denied_by"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Policy != "api" || got.Store != "memory" || got.Allowed || got.DeniedBy != "per-user" {
		t.Errorf("JSON %s: %+v, %v", b, got, err)
	}

	pk, err = oneshot.PeekPolicy(ctx, st, "memory", cfg, p, map[string]string{"user": "bob", "tier": "banned"}, 1)
	out.Reset()
	if err == nil {
		pk.WriteText(&out)
	}
	if err != nil || pk.Allowed() || !strings.Contains(out.String(), "  blocked          0/0 used per 1m0s  blocked: a limit of 0 admits nothing\n") {
		t.Errorf("peek of a blocked tier: %v\n%s", err, out.String())
	}
}

// reserve makes n reservations on the schedule named name, the clock
// standing still, and returns their lines.
func reserve(t *testing.T, name string, cost int64, n int) (*sluice.Schedule, []oneshot.Line) {
	t.Helper()
	cfg := parse(t)
	sched, err := cfg.FindSchedule(name)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{Clock: storetest.NewClock(t0).Now})
	var lines []oneshot.Line
	err = oneshot.Reserve(context.Background(), st, cfg, sched, map[string]string{"carrier": "45"}, cost, n, func(l oneshot.Line) error {
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sched, lines
}

// TestReserve: at 4/s with a max delay of 1s, five reservations get slots
// 250ms apart and the next wait too long; each line says so, as text and
// as JSON.
func TestReserve(t *testing.T) {
	t.Parallel()
	sched, lines := reserve(t, "carrier", 1, 7)
	if got, want := oneshot.ScheduleText(sched, "memory"), `schedule "carrier" on memory: 4/1s (one every 250ms), max delay 1s`; got != want {
		t.Errorf("ScheduleText = %q, want %q", got, want)
	}
	for i, l := range lines {
		k := int64(min(i, 5))
		wantOK := i < 5
		if l.N != i+1 || l.OK != wantOK || l.DelayMS != k*250 || l.DelayUS != k*250_000 || (l.ID != "") != wantOK || l.Queue != min(k+1, 5) {
			t.Errorf("line %d: %+v, want ok=%v delay %dms", i+1, l, wantOK, k*250)
		}
		if want := t0.Add(time.Duration(k) * 250 * time.Millisecond).Format(time.RFC3339Nano); wantOK && l.Slot != want {
			t.Errorf("line %d: slot %s, want %s", i+1, l.Slot, want)
		}
	}
	if got, want := lines[1].String(), "#2   ok        leaves in 250ms      queue 2   id "+lines[1].ID; got != want {
		t.Errorf("line 2:\n got %q\nwant %q", got, want)
	}
	if got, want := lines[5].String(), "#6   rejected  (delay) it would wait 1.25s, queue 5 (max delay 1s)"; got != want {
		t.Errorf("line 6:\n got %q\nwant %q", got, want)
	}
}

// TestReserveMaxQueue: with a queue of at most 2, the third reservation is
// rejected for the queue, and the line names the bound.
func TestReserveMaxQueue(t *testing.T) {
	t.Parallel()
	_, lines := reserve(t, "short", 2, 3)
	if len(lines) != 3 || !lines[0].OK || !lines[1].OK || lines[2].OK || lines[2].Reason != "queue" {
		t.Fatalf("lines %+v, want two slots and one rejected for the queue", lines)
	}
	if got := lines[2].String(); !strings.HasPrefix(got, "#3   rejected  (queue) it would wait ") || !strings.HasSuffix(got, "(max delay 10s, max queue 2)") {
		t.Errorf("line 3 = %q", got)
	}
}

// TestScheduleSpec: a spec names a file's schedule or one at a rate, and
// each way of getting it wrong says how to get it right.
func TestScheduleSpec(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(configFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		spec oneshot.ScheduleSpec
		want string
	}{
		{oneshot.ScheduleSpec{}, "give the schedule with --config FILE --schedule NAME, or with --rate"},
		{oneshot.ScheduleSpec{File: file}, "--schedule is required with --config"},
		{oneshot.ScheduleSpec{File: file, Name: "carrier", Rate: "4/s"}, "use either --config or --rate"},
		{oneshot.ScheduleSpec{File: file, Name: "nope"}, `"nope" is not in ` + file + " (schedules: carrier, short)"},
		{oneshot.ScheduleSpec{File: file + ".missing", Name: "carrier"}, "sluice.yaml.missing"},
		{oneshot.ScheduleSpec{Rate: "four/s"}, "--rate: "},
		{oneshot.ScheduleSpec{Rate: "4/s", MaxDelay: -time.Second}, "negative max delay"},
	} {
		if s, _, err := tt.spec.Schedule(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, %v; want an error with %q", tt.spec, s, err, tt.want)
		}
	}
	s, cfg, err := (&oneshot.ScheduleSpec{File: file, Name: "short"}).Schedule()
	if err != nil || cfg == nil || s.Name != "short" || s.MaxQueue != 2 {
		t.Errorf("the file's short: %+v, %v; want it with its max queue of 2", s, err)
	}
	s, cfg, err = (&oneshot.ScheduleSpec{Rate: "4/s", MaxDelay: time.Second, MaxQueue: 3, By: []string{"carrier"}}).Schedule()
	if err != nil || cfg != nil || s.Name != "cli" || s.Interval() != 250*time.Millisecond || s.MaxDelay != time.Second || s.MaxQueue != 3 || len(s.By) != 1 {
		t.Errorf("at 4/s: %+v, %v, %v; want cli, one every 250ms, by carrier, and no file", s, cfg, err)
	}
}
