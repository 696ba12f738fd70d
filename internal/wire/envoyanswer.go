package wire

import (
	"net/http"
	"strconv"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// WriteEnvoyAnswer writes body, the JSON of an answer of POST /json ending
// in a newline: 429 when the answer is over the limit, else 200.
func WriteEnvoyAnswer(w http.ResponseWriter, over bool, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	if over {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(body)
}

// AppendEnvoyResponse appends r as protojson.Marshal encodes it, up to the
// space between tokens (which protojson varies on purpose), and reports
// whether it did. It encodes the fields sluice sets: overall_code,
// statuses (code, current_limit, limit_remaining, duration_until_reset)
// and response_headers_to_add (key, value). It reports false, with b cut
// back to its length, where protojson.Marshal may differ: another field
// set, a nil element of a list, text that is not UTF-8 (which protojson
// refuses), a duration out of protobuf's range.
func AppendEnvoyResponse(b []byte, r *rlsv3.RateLimitResponse) ([]byte, bool) {
	start := len(b)
	if r == nil || len(r.RequestHeadersToAdd) > 0 || len(r.RawBody) > 0 || r.DynamicMetadata != nil || r.Quota != nil {
		return b, false
	}
	b = append(b, '{')
	if r.OverallCode != 0 {
		b = appendEnum(appendName(b, "overallCode"), int32(r.OverallCode), rlsv3.RateLimitResponse_Code_name)
	}
	if len(r.Statuses) > 0 {
		b = append(appendName(b, "statuses"), '[')
		for i, st := range r.Statuses {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendDescriptorStatus(b, st); !ok {
				return b[:start], false
			}
		}
		b = append(b, ']')
	}
	if len(r.ResponseHeadersToAdd) > 0 {
		b = append(appendName(b, "responseHeadersToAdd"), '[')
		for i, h := range r.ResponseHeadersToAdd {
			if h == nil || len(h.RawValue) > 0 || !utf8.ValidString(h.Key) || !utf8.ValidString(h.Value) {
				return b[:start], false
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if h.Key != "" {
				b = appendString(appendName(b, "key"), h.Key)
			}
			if h.Value != "" {
				b = appendString(appendName(b, "value"), h.Value)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// appendDescriptorStatus appends st as protojson encodes it, or reports
// false (see AppendEnvoyResponse).
func appendDescriptorStatus(b []byte, st *rlsv3.RateLimitResponse_DescriptorStatus) ([]byte, bool) {
	if st == nil || st.Quota != nil {
		return b, false
	}
	b = append(b, '{')
	if st.Code != 0 {
		b = appendEnum(appendName(b, "code"), int32(st.Code), rlsv3.RateLimitResponse_Code_name)
	}
	if l := st.CurrentLimit; l != nil {
		if !utf8.ValidString(l.Name) {
			return b, false
		}
		b = append(appendName(b, "currentLimit"), '{')
		if l.Name != "" {
			b = appendString(appendName(b, "name"), l.Name)
		}
		if l.RequestsPerUnit != 0 {
			b = strconv.AppendUint(appendName(b, "requestsPerUnit"), uint64(l.RequestsPerUnit), 10)
		}
		if l.Unit != 0 {
			b = appendEnum(appendName(b, "unit"), int32(l.Unit), rlsv3.RateLimitResponse_RateLimit_Unit_name)
		}
		if l.UnitMultiplier != nil {
			// A wrapper is written as the value it wraps, even 0.
			b = strconv.AppendUint(appendName(b, "unitMultiplier"), uint64(l.UnitMultiplier.Value), 10)
		}
		b = append(b, '}')
	}
	if st.LimitRemaining != 0 {
		b = strconv.AppendUint(appendName(b, "limitRemaining"), uint64(st.LimitRemaining), 10)
	}
	if st.DurationUntilReset != nil {
		var ok bool
		if b, ok = appendDuration(appendName(b, "durationUntilReset"), st.DurationUntilReset); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendName appends an object member's name and colon, after a comma
// unless it is the object's first.
func appendName(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendEnum appends an enum's value as protojson does: its name, or its
// number when it has none.
func appendEnum(b []byte, v int32, names map[int32]string) []byte {
	if name, ok := names[v]; ok {
		return append(append(append(b, '"'), name...), '"')
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// Protobuf's range of a google.protobuf.Duration, as protojson checks it.
const (
	maxDurationSeconds = 315576000000
	maxDurationNanos   = 999999999
)

// appendDuration appends d as protojson encodes a google.protobuf.Duration:
// a string of seconds with 0, 3, 6 or 9 fractional digits, as few as say
// it exactly ("59s", "1.500s", "-0.000001s"). It reports false for a
// duration protojson refuses: out of range, or seconds and nanos of
// different signs.
func appendDuration(b []byte, d *durationpb.Duration) ([]byte, bool) {
	secs, nanos := d.Seconds, int64(d.Nanos)
	if secs < -maxDurationSeconds || secs > maxDurationSeconds || nanos < -maxDurationNanos || nanos > maxDurationNanos ||
		(secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
		return b, false
	}
	b = append(b, '"')
	if secs < 0 || nanos < 0 {
		b, secs, nanos = append(b, '-'), -secs, -nanos
	}
	b = strconv.AppendInt(b, secs, 10)
	if nanos != 0 {
		digits := 9
		for digits > 0 && nanos%1000 == 0 {
			nanos /= 1000
			digits -= 3
		}
		b = append(b, '.')
		p := int64(1)
		for range digits - 1 {
			p *= 10
		}
		for ; p > 0; p /= 10 {
			b = append(b, byte('0'+nanos/p%10))
		}
	}
	return append(b, 's', '"'), true
}
