package load

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLatencyBuckets(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{time.Microsecond, 3 * time.Microsecond, 40 * time.Microsecond, 900 * time.Microsecond, 7 * time.Millisecond} {
		h.Add(d)
		if up := bucketUpper(bucketOf(d)); up < d || float64(up) > 1.25*float64(d) {
			t.Errorf("%v lands in a bucket ending at %v", d, up)
		}
	}
	if got := h.Quantile(1); got != 7*time.Millisecond {
		t.Errorf("max quantile %v, want 7ms", got)
	}
	var buf bytes.Buffer
	h.Draw(&buf)
	if n := strings.Count(buf.String(), "\n"); n < 5 {
		t.Errorf("histogram of five spread latencies has %d lines:\n%s", n, buf.String())
	}
}

// TestQuantiles: a quantile is the upper bound of its sample's bucket, at
// or above the true value and within 1/16 of it, for durations from a
// nanosecond to an hour.
func TestQuantiles(t *testing.T) {
	for _, d := range []time.Duration{2, 15, 16, 17, 1000, 1023, 1024, 1025, 123_456_789, time.Hour} {
		b := bucketOf(d)
		if up := bucketUpper(b); up < d || float64(up-d) > float64(d)/16 {
			t.Errorf("%v: bucket %d ends at %v", int64(d), b, int64(up))
		}
		if below := bucketOf(d - 1); below != b && bucketUpper(below) >= d {
			t.Errorf("%v: the bucket of %v, %d, ends at %v, not below it", int64(d), int64(d-1), below, int64(bucketUpper(below)))
		}
	}
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 501 * time.Microsecond}, {0.9, 901 * time.Microsecond}, {0.99, 991 * time.Microsecond}, {1, time.Millisecond}} {
		if got := h.Quantile(c.q); got < c.want || float64(got-c.want) > float64(c.want)/16 {
			t.Errorf("quantile %v of 1µs…1ms: %v, want %v (up to 1/16 above)", c.q, got, c.want)
		}
	}
	if h.N() != 1000 || h.Max() != time.Millisecond {
		t.Errorf("%d counted, largest %v; want 1000 and 1ms", h.N(), h.Max())
	}
	var empty Histogram
	var buf bytes.Buffer
	if empty.Draw(&buf); empty.Quantile(0.5) != 0 || buf.Len() != 0 {
		t.Errorf("empty histogram: quantile %v, drawn %q", empty.Quantile(0.5), buf.String())
	}
}
