package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicerate/sluice"
)

// TestRateIsParseRate checks that a file's rate: reads as sluice.ParseRate,
// which `sluice reserve --rate` uses, reads it: the same rate, or the same
// error at the rate's position.
func TestRateIsParseRate(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"4/s", "100/30m", "10/1m", " 5 / h ", "1/ms", "3/500ms", "1/d", "7/1d", "3/2d12h", "1/1.5h", "1000000/s", "1/366d",
		"", "4", "/s", "x/s", "0/s", "-1/s", "1.5/s", "4/", "4/x", "4/sec", "4/30", "4/0", "4/0s", "4/-1s", "4/1.5d",
		"4/1d-1h", "4/367d", "4/99999999999d", "2000001/s", "2000000/ms", "4/s/s",
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			want, wantErr := sluice.ParseRate(in)
			c, err := Parse("f.yaml", fmt.Appendf(nil, "schedules:\n  - name: s\n    rate: %q\n", in))
			switch {
			case wantErr == nil && err != nil:
				t.Fatalf("ParseRate(%q) = %v, but the file says %v", in, want, err)
			case wantErr == nil && c.Schedules[0].Rate != want:
				t.Fatalf("ParseRate(%q) = %v, but the file's rate is %v", in, want, c.Schedules[0].Rate)
			case wantErr != nil && err == nil:
				t.Fatalf("ParseRate(%q): %v, but the file's rate is %v", in, wantErr, c.Schedules[0].Rate)
			case wantErr != nil:
				msg := strings.TrimPrefix(wantErr.Error(), "sluice: ")
				if got := err.Error(); got != "f.yaml:3:11: "+msg {
					t.Fatalf("the file says %q, want f.yaml:3:11: %s", got, msg)
				}
			}
		})
	}
}
