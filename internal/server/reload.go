package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"time"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/yamlfile"
)

// ReloadFile loads the configuration file at path and, when it is valid,
// swaps it in. An invalid file is logged with every problem found and
// returned as an error; the configuration in use stays.
func (s *Server) ReloadFile(path string) error {
	cfg, err := config.Load(path)
	if err == nil {
		err = s.Swap(cfg)
	}
	s.view.Reloaded(path, err)
	s.front.Metrics.Reload(err)
	if err != nil {
		s.front.Log.Error("configuration not reloaded; the previous one stays in use", slog.String("file", path), slog.Any("err", err))
		return err
	}
	s.front.Log.Info("configuration reloaded", slog.String("file", path),
		slog.Int("policies", len(cfg.Policies)), slog.Int("schedules", len(cfg.Schedules)))
	return nil
}

// Watch reloads the file at path whenever its contents change, checking
// every interval (0: never, only on reload), and whenever a value arrives
// on reload (a SIGHUP, say), until ctx ends. Polling the contents, rather
// than waiting for file system events, follows editors that replace the
// file and Kubernetes config maps that swap a symbolic link.
func (s *Server) Watch(ctx context.Context, path string, interval time.Duration, reload <-chan os.Signal) {
	watchChanges(ctx, interval, reload, func() []byte { return fileSum(path) }, func(signalled bool) {
		if signalled {
			s.front.Log.Info("reloading the configuration on signal", slog.String("file", path))
		} else {
			s.front.Log.Info("the configuration file changed; reloading", slog.String("file", path))
		}
		_ = s.ReloadFile(path)
	})
}

// ReloadEnvoyConfig reloads the Envoy configuration's directory and, when
// it is valid, swaps it in (rls.Front.Reload): each request is decided
// wholly under the old or the new files. An invalid directory is logged
// with every problem and returned; the files in use stay.
func (s *Server) ReloadEnvoyConfig() error { return s.envoy.Reload() }

// WatchEnvoyConfig reloads the Envoy configuration's directory whenever a
// file in it changes, appears or goes (checked every interval; 0: never,
// only on reload), and on each value from reload, until ctx ends: as
// envoyproxy/ratelimit follows its runtime directory, Kubernetes config
// maps included. It compares the files the loader reads
// (yamlfile.Sum).
func (s *Server) WatchEnvoyConfig(ctx context.Context, interval time.Duration, reload <-chan os.Signal) {
	dir := s.envoy.Dir()
	watchChanges(ctx, interval, reload, func() []byte { return yamlfile.Sum(dir) }, func(signalled bool) {
		if !signalled {
			s.front.Log.Info("the Envoy configuration changed; reloading", slog.String("dir", dir))
		}
		_ = s.ReloadEnvoyConfig()
	})
}

// watchChanges calls reload whenever sum's value changes, checked every
// interval (0: never), and whenever a value arrives on signal, until ctx
// ends. sum returns nil while what it sums cannot be read, which is not a
// change.
func watchChanges(ctx context.Context, interval time.Duration, signal <-chan os.Signal, sum func() []byte, reload func(signalled bool)) {
	last := sum()
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-signal:
			last = sum()
			reload(true)
		case <-tick:
			now := sum()
			if now == nil || bytes.Equal(now, last) {
				continue
			}
			last = now
			reload(false)
		}
	}
}

// fileSum is the SHA-256 of the file's contents, or nil when it cannot be
// read (while an editor replaces it, say).
func fileSum(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:]
}
