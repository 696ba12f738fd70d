package launch

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/redistest"
)

// redisFile returns a configuration of the standalone Redis at addr.
func redisFile(addr, prefix string) *config.Config {
	return &config.Config{Store: &config.Store{Redis: &config.Redis{Addrs: []string{addr}}, Prefix: prefix}}
}

// TestOpenMemory: no URL and no store section is the in-memory store,
// always ready, with no Redis reader or window reset.
func TestOpenMemory(t *testing.T) {
	t.Parallel()
	for _, cfg := range []*config.Config{nil, {}, {Store: &config.Store{Prefix: "p"}}} {
		s, err := Open(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		if s.Where != "the in-memory store" || s.Redis != nil || s.Inspector() != nil || s.WindowReset() != nil {
			t.Errorf("Open(%+v, \"\") = %q, Redis %v: want the in-memory store and nothing of Redis", cfg, s.Where, s.Redis)
		}
		if err := s.Ping(context.Background()); err != nil {
			t.Errorf("Ping = %v, want nil", err)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestOpenRefusesBadInput: what cannot be opened is an error that names
// the setting and how to write it, and opens nothing.
func TestOpenRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		url  string
		want []string
	}{
		{"url scheme", nil, "http://127.0.0.1:6379", []string{"--redis", "redis://[user:password@]host:port"}},
		{"url mode", nil, "redis://127.0.0.1:6379?mode=ring", []string{"--redis", "mode=cluster|sentinel"}},
		{"file mode", &config.Config{Store: &config.Store{Redis: &config.Redis{Addrs: []string{"127.0.0.1:1"}, Mode: "ring"}}}, "", []string{"store.redis.mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.cfg, tc.url)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) = %s, want an error", tc.url, s.Where)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open(%q) = %v, want it to name %q", tc.url, err, w)
				}
			}
		})
	}
}

// TestOpenRedis opens a standalone Redis from the file and from a URL:
// described by its mode and address, warm when pinged, with the file's
// prefix on the keys in both cases.
func TestOpenRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		url  string
	}{
		{"file", redisFile(rs.Addr(), "lf"), ""},
		{"url", &config.Config{Store: &config.Store{Prefix: "lu"}}, "redis://" + rs.Addr()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.cfg, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if want := "Redis (standalone) at " + rs.Addr(); s.Where != want {
				t.Errorf("Where = %q, want %q", s.Where, want)
			}
			if s.Redis == nil || s.Client == nil || s.Inspector() == nil || s.WindowReset() == nil || s.Unreachable != nil {
				t.Errorf("a Redis store without its client, inspector or window reset, or unreachable (%v)", s.Unreachable)
			}
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("Ping = %v", err)
			}
			p := &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", Limit: 5, Window: time.Minute}}}
			if d, err := sluice.NewLimiter(s, sluice.Config{}).Allow(context.Background(), p, nil); err != nil || !d.Allowed {
				t.Fatalf("Allow = %+v, %v; want allowed", d, err)
			}
			keys, err := rs.Do("KEYS", tc.cfg.Store.Prefix+":*")
			if err != nil || keys == "" {
				t.Errorf("KEYS %s:* = %q, %v; want the decision's window under the file's prefix", tc.cfg.Store.Prefix, keys, err)
			}
		})
	}
}

// TestOpenWaitable: a standalone Redis that does not answer is an error,
// unless opened to be waited for; then the store is opened unreachable,
// and WaitReady returns, saying so once, when Redis answers.
func TestOpenWaitable(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	if err := rs.Shut(); err != nil {
		t.Fatal(err)
	}
	cfg := redisFile(rs.Addr(), "lw")
	if s, err := Open(cfg, ""); err == nil || !strings.Contains(err.Error(), "connecting to Redis (standalone) at "+rs.Addr()) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a Redis that does not answer = %v, want an error naming it", err)
	}
	s, err := OpenWith(cfg, "", Dial{Waitable: true})
	if err != nil {
		t.Fatalf("OpenWith(Waitable) = %v, want a store", err)
	}
	defer s.Close()
	if s.Unreachable == nil {
		t.Fatal("Unreachable = nil for a Redis that does not answer")
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Fatal("Ping = nil before Redis answers")
	}
	if err := rs.Restart(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.WaitReady(ctx, slog.New(slog.NewTextHandler(&logs, nil)), 10*time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("WaitReady returned at the deadline: %v", ctx.Err())
	}
	if n := strings.Count(logs.String(), "the store answers; ready"); n != 1 {
		t.Errorf("WaitReady logged ready %d times, want once:\n%s", n, logs.String())
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping after WaitReady = %v", err)
	}
}
