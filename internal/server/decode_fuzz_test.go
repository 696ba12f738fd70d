package server

import (
	"net/http"
	"testing"
)

// FuzzParseDecide checks that the request decoder never panics, answers
// every body with either a request that has a policy and a cost of at least
// 1 or a 400 problem that says what is wrong.
func FuzzParseDecide(f *testing.F) {
	f.Add([]byte(decideExample))
	f.Add([]byte(`{"policy":"p"}`))
	f.Add([]byte(`{"policy":"p","attributes":{"a":"b","c":""},"cost":9223372036854775807}`))
	f.Add([]byte(`{"policy":"p","cost":0}`))
	f.Add([]byte(`{"policy":"p","attributes":null,"cost":null}`))
	f.Add([]byte(`{"policy":"p"} x`))
	f.Add([]byte(`[{"policy":"p"}]`))
	f.Add([]byte("\xff\xfe"))
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
		if req == nil || req.Policy == "" || req.cost() < 1 {
			t.Fatalf("accepted %q as %+v", body, req)
		}
	})
}
