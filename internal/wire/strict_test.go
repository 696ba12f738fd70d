package wire

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
)

// FuzzParseDecide checks that the request decoder never panics, answers
// every body with either a request that has a policy, from text that
// decodes without a replaced byte, or a 400 problem that says what is
// wrong. (The cost is the edge's to check.)
func FuzzParseDecide(f *testing.F) {
	f.Add([]byte(front.DecideExample))
	f.Add([]byte(`{"policy":"p"}`))
	f.Add([]byte(`{"policy":"p","attributes":{"a":"b","c":""},"cost":9223372036854775807}`))
	f.Add([]byte(`{"policy":"p","cost":0}`))
	f.Add([]byte(`{"policy":"p","attributes":null,"cost":null}`))
	f.Add([]byte(`{"policy":"p"} x`))
	f.Add([]byte(`[{"policy":"p"}]`))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte(`{"policy":"p","attributes":{"user":"\xff"}}`))
	f.Add([]byte(`{"policy":"p","attributes":{"user":"\ud800"}}`))
	f.Add([]byte(`{"policy":"p\udc00","attributes":{"user":"\ud83d\ude00"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, p := parseDecide(body)
		if p != nil {
			if req != nil {
				t.Fatal("both a request and a problem")
			}
			if p.Status != http.StatusBadRequest || p.Code == "" || p.Detail == "" {
				t.Fatalf("bad problem %+v", p)
			}
			return
		}
		if req == nil || req.Policy == "" {
			t.Fatalf("accepted %q as %+v", body, req)
		}
		// A U+FFFD in what was accepted is one the client sent, never a
		// byte the decoder replaced.
		sent := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		for k, v := range req.Attributes {
			if (strings.ContainsRune(k, utf8.RuneError) || strings.ContainsRune(v, utf8.RuneError)) && !sent {
				t.Fatalf("accepted %q with a replaced byte in attribute %q: %q", body, k, v)
			}
		}
	})
}

// parseDecide decodes body as a decide request, in a Scratch of its own.
func parseDecide(body []byte) (*DecideRequest, *httplimit.Problem) {
	sc := &Scratch{attrs: make(map[string]string)}
	return sc.ParseDecide(body)
}
