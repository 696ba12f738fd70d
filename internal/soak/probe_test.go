package soak

import (
	"strings"
	"testing"
)

// TestServerTimeline: per 100 ms, each server's script calls, slot map
// reads, error replies and failed commands since its previous probe, its
// role and replicas when they change, a probe it did not answer, and a
// restart (its counters start again).
func TestServerTimeline(t *testing.T) {
	const a = "127.0.0.1:7000"
	sample := func(atMS int64, role string, online int, scripts, moved int64) ServerSample {
		return ServerSample{At: atMS * ms, Addr: a, Role: role, ReplID: "abcd", Online: online, Scripts: scripts,
			Errors: map[string]int64{"MOVED": moved}, Failed: map[string]int64{"evalsha": moved}}
	}
	samples := []ServerSample{
		sample(50, "master", 1, 100, 0),
		sample(150, "master", 1, 180, 0), // 80 scripts
		sample(250, "slave", 0, 180, 30), // demoted: 30 MOVED
		{At: 350 * ms, Addr: a, Err: "i/o timeout"},
		sample(450, "master", 0, 5, 0), // restarted: counters from 0
	}
	var b strings.Builder
	ServerTimeline(&b, samples, 100*ms, 500*ms, 100*ms)
	want := []string{
		"+0.0s servers  127.0.0.1:7000: 80 scripts",
		"+0.1s servers  127.0.0.1:7000: now slave abcd, 0 replicas online, 30 MOVED, 30 evalsha failed",
		"+0.2s servers  127.0.0.1:7000: no answer: i/o timeout",
		"+0.3s servers  127.0.0.1:7000: now master abcd, 0 replicas online, 5 scripts, (restarted)",
	}
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(got) != len(want) {
		t.Fatalf("timeline:\n%s\nwant:\n%s", b.String(), strings.Join(want, "\n"))
	}
	for i := range want {
		if strings.TrimSpace(got[i]) != want[i] {
			t.Errorf("line %d: %q, want %q", i+1, strings.TrimSpace(got[i]), want[i])
		}
	}
}
