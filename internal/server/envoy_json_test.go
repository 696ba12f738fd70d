package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/front"
)

// TestEnvoyJSONAnswers checks POST /json against the handler as it was,
// with protojson alone, on bodies of both models: the same status, the
// same problem word for word, the same JSON value.
func TestEnvoyJSONAnswers(t *testing.T) {
	const file = `
policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 2, window: 1m}
      - {name: per-path, by: [path], limit: 100, window: 1h}
`
	newServer := func() *testServer {
		ts := newTestServer(t, file)
		edge := edgeEnvoy + "  - key: route\n    descriptors:\n      - key: user\n        rate_limit: {unit: second, requests_per_unit: 1}\n"
		loadEnvoy(t, ts.srv, EnvoyOptions{Decide: decide.Options{Headers: decide.Headers{RateLimit: true, XRateLimit: true}}}, map[string]string{"edge.yaml": edge})
		return ts
	}
	got, want := newServer(), newServer()
	bodies := []string{
		`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}],"hitsAddend":1}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]},{"entries":[{"key":"route","value":"r"},{"key":"user","value":"u1"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}],"hitsAddend":"1"}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}],"hitsAddend":0}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u<&>\"\u2028"}]},{"entries":[{"key":"path","value":"/"}]}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u<&>\"\u2028"}]}],"hitsAddend":2}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u2"}],"hitsAddend":0}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"a"}]},{"entries":[{"key":"user","value":"b"}]}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u3"}]}],"hitsAddend":4294967295}`,
		`{"domain":"api"}`,
		`{"domain":"other","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`,
		`{}`,
		`{"domain":"api","unknown":1}`,
		`{"domain":"api","domain":"api"}`,
		`{"domain":"api","hitsAddend":-1}`,
		"{\"domain\":\"\xff\"}",
		`{"domain":`,
		``,
		strings.Repeat(" ", 1025),
	}
	seen := map[int]bool{}
	for _, body := range bodies {
		w := got.do("POST", "/json", body)
		code, header, answer := referenceEnvoyJSON(want, []byte(body))
		seen[code] = true
		if w.Code != code {
			t.Errorf("%s: %d %s; before: %d %s", body, w.Code, w.Body, code, answer)
			continue
		}
		if g, w := w.Header().Get("Content-Type"), header.Get("Content-Type"); g != w {
			t.Errorf("%s: Content-Type %q; before: %q", body, g, w)
		}
		if code == 200 || code == 429 {
			var g, w2 any
			if err := json.Unmarshal(w.Body.Bytes(), &g); err != nil {
				t.Fatalf("%s: %q: %v", body, w.Body, err)
			}
			if err := json.Unmarshal(answer, &w2); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w2) || !bytes.HasSuffix(w.Body.Bytes(), []byte("}\n")) {
				t.Errorf("%s: %s; before: %s", body, w.Body, answer)
			}
		} else if !bytes.Equal(w.Body.Bytes(), answer) {
			t.Errorf("%s: %d %s; before: %s", body, w.Code, w.Body, answer)
		}
	}
	for _, code := range []int{200, 429, 400, 413} {
		if !seen[code] {
			t.Errorf("no body is answered %d", code)
		}
	}
}

// referenceEnvoyJSON answers body as POST /json did with protojson alone:
// the status, headers and body. The request is decided by Envoy's
// rate-limit service over gRPC, on ts's server.
func referenceEnvoyJSON(ts *testServer, body []byte) (int, http.Header, []byte) {
	w := httptest.NewRecorder()
	f := ts.srv.front
	if len(body) > int(f.MaxBody) {
		f.Fail(w, "json", &httplimit.Problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Detail: fmt.Sprintf("the body is over %d bytes", f.MaxBody)})
		return w.Code, w.Header(), w.Body.Bytes()
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		f.Fail(w, "json", front.BadRequest("malformed_json", "the body is not a RateLimitRequest in protobuf's JSON mapping (%v); send {\"domain\":\"D\",\"descriptors\":[{\"entries\":[{\"key\":\"K\",\"value\":\"V\"}]}]}", err))
		return w.Code, w.Header(), w.Body.Bytes()
	}
	out, err := rlsv3.NewRateLimitServiceClient(ts.conn()).ShouldRateLimit(context.Background(), &req)
	if err != nil {
		front.StatusProblem(err).Write(w)
		return w.Code, w.Header(), w.Body.Bytes()
	}
	b, err := protojson.Marshal(out)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	if out.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(append(b, '\n'))
	return w.Code, w.Header(), w.Body.Bytes()
}
