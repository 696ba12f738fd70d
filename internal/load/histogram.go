package load

import (
	"fmt"
	"io"
	"math/bits"
	"strings"
	"time"
)

// subBuckets is the number of buckets per power of two of nanoseconds: a
// bucket is at most 1/16 of its lower bound wide, so a quantile, the upper
// bound of its bucket, is within 6.25% above the true value.
const subBuckets = 16

// subBits is log2(subBuckets).
const subBits = 4

// Histogram counts durations in log-linear buckets (16 per power of two of
// nanoseconds) and keeps the largest exactly. Its zero value is empty and
// ready; it is not safe for concurrent use (Run gives each goroutine its
// own and merges them).
type Histogram struct {
	counts [64 * subBuckets]int64
	n      int64
	max    time.Duration
}

// bucketOf returns the bucket that d falls in: below 16 ns one per
// nanosecond, above it 16 per power of two.
func bucketOf(d time.Duration) int {
	v := uint64(max(d, 1))
	e := bits.Len64(v) - 1
	if e < subBits {
		return int(v)
	}
	return e*subBuckets + int(v>>(e-subBits))&(subBuckets-1)
}

// bucketUpper returns the largest duration that falls in bucket b.
func bucketUpper(b int) time.Duration {
	e, m := b/subBuckets, b%subBuckets
	if e < subBits {
		return time.Duration(b)
	}
	return time.Duration(uint64(subBuckets+m+1)<<(e-subBits)) - 1
}

// Add counts one duration.
func (h *Histogram) Add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.max = max(h.max, d)
}

// Merge adds o's counts to h's.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// N returns the number of durations counted.
func (h *Histogram) N() int64 { return h.n }

// Max returns the largest duration counted (0 when empty).
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the duration at or below which a fraction q (0 to 1) of
// the counted ones lie: the upper bound of the bucket that holds the
// sample of rank q·N, never above the largest; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	target := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen > target {
			return min(bucketUpper(i), h.max)
		}
	}
	return h.max
}

// Draw writes the counts in 1-2-5 ranges (≤ 1µs, ≤ 2µs, ≤ 5µs, ≤ 10µs, …)
// from the fastest to the slowest range that holds any, a line each with
// a bar, the share and the count.
func (h *Histogram) Draw(w io.Writer) {
	bounds := []time.Duration{}
	for d := time.Microsecond; d <= time.Minute; d *= 10 {
		bounds = append(bounds, d, 2*d, 5*d)
	}
	counts := make([]int64, len(bounds)+1)
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		up := bucketUpper(b)
		i := 0
		for i < len(bounds) && up > bounds[i] {
			i++
		}
		counts[i] += c
	}
	first, last := -1, -1
	var most int64
	for i, c := range counts {
		if c > 0 {
			if first < 0 {
				first = i
			}
			last = i
			most = max(most, c)
		}
	}
	const width = 40
	for i := first; i <= last && first >= 0; i++ {
		label := "> " + bounds[len(bounds)-1].String()
		if i < len(bounds) {
			label = "≤ " + bounds[i].String()
		}
		bar := int((counts[i]*width + most - 1) / most)
		fmt.Fprintf(w, "  %9s  %-*s %6.2f%%  %d\n", label, width, strings.Repeat("█", bar), 100*float64(counts[i])/float64(h.n), counts[i])
	}
}
