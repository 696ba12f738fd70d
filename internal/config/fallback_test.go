package config_test

import (
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/config"
)

// TestFallback: on_error: fallback decides in memory while the store
// fails, on a share of every limit; fallback_share needs it.
func TestFallback(t *testing.T) {
	t.Parallel()
	const policy = "policies:\n  - name: p\n    limits: [{name: r, limit: 9, window: 1m}]\n"
	cfg, err := config.Parse("f.yaml", []byte("store:\n  on_error: fallback\n  fallback_share: 3\n"+policy))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Store.Fallback || cfg.Store.FallbackShare != 3 {
		t.Errorf("store %+v, want the fallback on a third", cfg.Store)
	}
	cfg, err = config.Parse("f.yaml", []byte("store:\n  on_error: fallback\n"+policy))
	if err != nil || cfg.Store.FallbackShare != 1 {
		t.Errorf("no share: %+v, %v; want a share of 1", cfg.Store, err)
	}
	for file, want := range map[string]string{
		"store:\n  fallback_share: 3\n":                       "f.yaml:2:19: fallback_share is for on_error: fallback",
		"store:\n  on_error: fallback\n  fallback_share: 0\n": "f.yaml:3:19: ",
		"store:\n  on_error: local\n":                         `use deny (fail closed, the default), allow (fail open) or fallback`,
	} {
		if _, err := config.Parse("f.yaml", []byte(file+policy)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", file, err, want)
		}
	}
}
