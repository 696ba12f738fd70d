package xds_test

import (
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
)

func anys(t *testing.T, rcs ...*rlsconfv3.RateLimitConfig) []*anypb.Any {
	t.Helper()
	var out []*anypb.Any
	for _, rc := range rcs {
		a, err := anypb.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// TestSources: a resource with every field loads as the file with the same
// keys would.
func TestSources(t *testing.T) {
	meta, _ := structpb.NewStruct(map[string]any{"service_with_quota": map[string]any{"name": "a"}})
	rc := &rlsconfv3.RateLimitConfig{Name: "eg/route", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "k", Value: "v", ShadowMode: true, DetailedMetric: true, QuotaMode: true, Metadata: meta,
			RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 7, Name: "n",
				Replaces: []*rlsconfv3.RateLimitReplace{{Name: "other"}}},
			Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "sub", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}}}},
		{Key: "zero", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND}},
	}}
	docs, err := xds.Sources(anys(t, rc))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Name != "xds:eg/route" {
		t.Fatalf("documents %v", docs)
	}
	cfg, err := envoy.Parse(docs, envoy.LoadOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, docs[0].Data)
	}
	want := "d.k_v.sub: unlimited, shadow_mode: false, quota_mode: false\n" +
		"d.k_v: unit=HOUR requests_per_unit=7, shadow_mode: true, quota_mode: true\n" +
		"d.zero: unit=SECOND requests_per_unit=0, shadow_mode: false, quota_mode: false\n"
	if got := cfg.Dump(); got != want {
		t.Errorf("loaded\n%s\nwant\n%s\nfrom\n%s", got, want, docs[0].Data)
	}
}

// TestSourceErrors: what the loader refuses, with the resource's name; a
// resource of another type.
func TestSourceErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		rc   *rlsconfv3.RateLimitConfig
		want string
	}{
		{"no domain", &rlsconfv3.RateLimitConfig{Name: "r"}, "xds:r:1:9: the file has no domain"},
		{"no unit", &rlsconfv3.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k",
			RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 1}}}}, "xds:r:5:7: a rate_limit has no unit"},
		{"unknown unit", &rlsconfv3.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k",
			RateLimit: &rlsconfv3.RateLimitPolicy{Unit: 42, RequestsPerUnit: 1}}}}, `xds:r:5:13: invalid rate limit unit "42"`},
		{"no key", &rlsconfv3.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Value: "v"}}},
			"xds:r:3:10: a descriptor has no key"},
		{"unlimited with a unit", &rlsconfv3.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k",
			RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true, Unit: rlsconfv3.RateLimitUnit_SECOND}}}}, "an unlimited rate_limit has no unit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := xds.Sources(anys(t, tt.rc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := envoy.Parse(docs, envoy.LoadOptions{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q; document\n%s", err, tt.want, docs[0].Data)
			}
		})
	}
	other, _ := anypb.New(structpb.NewStringValue("x"))
	if _, err := xds.Sources([]*anypb.Any{other}); err == nil || !strings.Contains(err.Error(), "this client takes type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig only") {
		t.Errorf("a resource of another type: %v", err)
	}
}
