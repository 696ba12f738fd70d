package rls_test

import (
	"math"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice/internal/envoy/rls"
)

// TestDescriptors: the command line's descriptors make a request, and its
// answer a line per descriptor.
func TestDescriptors(t *testing.T) {
	t.Parallel()
	var d rls.Descriptors
	for _, s := range []string{"k=v,k2=v2", "user=alice"} {
		if err := d.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Set("k=v,oops"); err == nil || !strings.Contains(err.Error(), `entry "oops" is not KEY=VALUE`) {
		t.Errorf("Set(k=v,oops): %v, want an error naming the entry", err)
	}
	req := d.Request("rl", 3)
	if got := len(req.GetDescriptors()); req.GetDomain() != "rl" || req.GetHitsAddend() != 3 || got != 2 {
		t.Fatalf("request %v, want domain rl, hits 3 and 2 descriptors", req)
	}
	if e := req.GetDescriptors()[0].GetEntries()[1]; e.GetKey() != "k2" || e.GetValue() != "v2" {
		t.Errorf("entry %v, want k2=v2", e)
	}
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32},
		{Code: rlsv3.RateLimitResponse_OK},
	}}
	var b strings.Builder
	d.WriteResponse(&b, "rl", "memory", out)
	got := b.String()
	for _, want := range []string{`domain "rl" on memory: OK`, "k=v,k2=v2", "unlimited", "user=alice", "no limit applies"} {
		if !strings.Contains(got, want) {
			t.Errorf("answer %q, want it to contain %q", got, want)
		}
	}
}
