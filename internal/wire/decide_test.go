package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
)

// decideBodies are bodies that the decoders must agree on: the fuzz
// targets' seeds and the table test's inputs.
var decideBodies = []string{
	front.DecideExample,
	`{"policy":"p"}`,
	` {"policy" : "p" , "attributes" : { "a" : "b" } , "cost" : 2 } ` + "\n\t\r",
	`{}`,
	`{"policy":""}`,
	`{"policy":null}`,
	`{"policy":"a","policy":null}`,
	`{"policy":"a","policy":"b"}`,
	`{"Policy":"a","POLICY":"b"}`,
	`{"pOlIcY":"a","ATTRIBUTES":{"x":"y"},"Cost":3}`,
	"{\"attributeſ\":{\"x\":\"y\"},\"coſt\":2,\"policy\":\"p\"}", // ſ folds to s
	"{\"policy\":\"p\",\"\u212aey\":1}",                          // the Kelvin sign folds to k
	`{"pol\u0069cy":"p"}`,
	`{"policy":"p","attributes":null}`,
	`{"policy":"p","attributes":{}}`,
	`{"policy":"p","attributes":{"a":"1"},"attributes":{"b":"2"}}`,
	`{"policy":"p","attributes":{"a":"1"},"attributes":null,"attributes":{"b":"2"}}`,
	`{"policy":"p","attributes":{"a":"1"},"attributes":null}`,
	`{"policy":"p","attributes":{"a":"1","a":"2"}}`,
	`{"policy":"p","attributes":{"a":null}}`,
	`{"policy":"p","attributes":{"":""}}`,
	`{"policy":"p","attributes":{"a":1}}`,
	`{"policy":"p","attributes":{"a":["b"]}}`,
	`{"policy":"p","attributes":{"a":{"b":"c"}}}`,
	`{"policy":"p","attributes":{"a":true}}`,
	`{"policy":"p","attributes":["a"]}`,
	`{"policy":"p","attributes":"a"}`,
	`{"policy":"p","cost":null}`,
	`{"policy":"p","cost":1,"cost":null}`,
	`{"policy":"p","cost":0}`,
	`{"policy":"p","cost":-0}`,
	`{"policy":"p","cost":-1}`,
	`{"policy":"p","cost":01}`,
	`{"policy":"p","cost":1.0}`,
	`{"policy":"p","cost":1e2}`,
	`{"policy":"p","cost":1E+2}`,
	`{"policy":"p","cost":-}`,
	`{"policy":"p","cost":9223372036854775807}`,
	`{"policy":"p","cost":9223372036854775808}`,
	`{"policy":"p","cost":-9223372036854775808}`,
	`{"policy":"p","cost":-9223372036854775809}`,
	`{"policy":"p","cost":10000000000000000000}`,
	`{"policy":"p","cost":99999999999999999999}`,
	`{"policy":"p","cost":"1"}`,
	`{"policy":"p","cost":true}`,
	`{"policy":1}`,
	`{"policy":["p"]}`,
	`{"policy":"p","other":1}`,
	`{"policy":"p",}`,
	`{"policy":"p"`,
	`{"policy":"p"}}`,
	`{"policy":"p"} x`,
	`{"policy":"p"} {}`,
	`{"policy":"p"}` + "\x00",
	`[{"policy":"p"}]`,
	`"p"`,
	`null`,
	``,
	` `,
	"\v",
	"\u00a0{\"policy\":\"p\"}",
	"\ufeff{\"policy\":\"p\"}",
	`{"policy":"p\"q\\r\/s\b\f\n\r\t"}`,
	`{"policy":"\u0000\u001f\u007f\u00e9\u20ac"}`,
	`{"policy":"` + "\x01" + `"}`,
	`{"policy":"\x"}`,
	`{"policy":"\u12"}`,
	`{"policy":"\u12G4"}`,
	`{"policy":"p","attributes":{"user":"\ud83d\ude00"}}`,
	`{"policy":"p","attributes":{"user":"\ud800"}}`,
	`{"policy":"p","attributes":{"user":"\udc00"}}`,
	`{"policy":"p","attributes":{"user":"\ud800\u0041"}}`,
	`{"policy":"p","attributes":{"user":"\ud800\ud800\udc00"}}`,
	`{"policy":"p","attributes":{"user":"\\ud800"}}`,
	`{"policy":"p","attributes":{"user":"\ufffd"}}`,
	"{\"policy\":\"p\",\"attributes\":{\"user\":\"\uFFFD\"}}",
	"{\"policy\":\"p\",\"attributes\":{\"user\":\"\xff\"}}",
	"{\"policy\":\"p\",\"attributes\":{\"\xfe\":\"u\"}}",
	"{\"policy\":\"p\xc3\"}",
	"{\"policy\":\"\xed\xa0\x80\"}",
	"{\"policy\":\"ünï\",\"attributes\":{\"名前\":\"值\"}}",
	`{"policy":"p","attributes":{"<&>":"\u2028\u2029"}}`,
	`{"policy":"p","attributes":{"a":"b"},"cost":5,"x":null}`,
	`{"policy":"p","attributes":{"a":"b" "c":"d"}}`,
	`{"policy":"p","attributes":{"a":"b",}}`,
	`{"policy":"p","attributes":{"a"}}`,
	`{"policy":nul}`,
	`{"policy":nullx}`,
	`{"cost":1}`,
}

// referenceDecide is what DecodeJSON, with encoding/json, decodes body to,
// and whether it accepts it.
func referenceDecide(body []byte) (DecideRequest, bool) {
	var req DecideRequest
	return req, DecodeJSON(body, &req, front.DecideExample) == nil
}

// plainJSON reports whether encoding/json alone accepts body, strictly as
// DecodeJSON asks it to, without DecodeJSON's check of the text.
func plainJSON(body []byte) bool {
	if len(bytes.TrimSpace(body)) == 0 {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req DecideRequest
	if dec.Decode(&req) != nil {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

// checkDecideDecoder checks the hand decoder against encoding/json on body
// with sc, a scratch reused between bodies.
func checkDecideDecoder(t *testing.T, sc *Scratch, body []byte) {
	t.Helper()
	want, wantOK := referenceDecide(body)
	ok := sc.decode(body)
	if ok != wantOK {
		t.Fatalf("body %q: the hand decoder accepts it: %v, DecodeJSON: %v", body, ok, wantOK)
	}
	if ok && !reflect.DeepEqual(sc.req, want) {
		t.Fatalf("body %q: the hand decoder decodes %s, encoding/json %s", body, showRequest(sc.req), showRequest(want))
	}
	// Where encoding/json alone accepts what the hand decoder rejects, it
	// replaced text with U+FFFD, which DecodeJSON finds.
	if !ok && plainJSON(body) && invalidText(body) < 0 {
		t.Fatalf("body %q: encoding/json accepts it, with valid text, and the hand decoder rejects it", body)
	}
	// The whole road: the same request, or the same problem.
	req, p := sc.ParseDecide(body)
	wantReq, wantP := parseDecideJSON(body)
	switch {
	case (p == nil) != (wantP == nil):
		t.Fatalf("body %q: problem %+v, want %+v", body, p, wantP)
	case p != nil && !reflect.DeepEqual(*p, *wantP):
		t.Fatalf("body %q: problem %+v, want %+v", body, *p, *wantP)
	case p == nil && !reflect.DeepEqual(*req, *wantReq):
		t.Fatalf("body %q: request %s, want %s", body, showRequest(*req), showRequest(*wantReq))
	}
}

// parseDecideJSON is parseDecide with encoding/json alone, as it was
// before the hand decoder.
func parseDecideJSON(body []byte) (*DecideRequest, *httplimit.Problem) {
	var req DecideRequest
	if p := DecodeJSON(body, &req, front.DecideExample); p != nil {
		return nil, p
	}
	if req.Policy == "" {
		return nil, front.BadRequest("bad_request", "the request names no policy; send an object such as %s", front.DecideExample)
	}
	return &req, nil
}

func showRequest(r DecideRequest) string {
	cost := "nil"
	if r.Cost != nil {
		cost = string(mustJSON(*r.Cost))
	}
	attrs := "nil"
	if r.Attributes != nil {
		attrs = string(mustJSON(r.Attributes))
	}
	return "{policy " + string(mustJSON(r.Policy)) + " attributes " + attrs + " cost " + cost + "}"
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestDecideDecoder(t *testing.T) {
	sc := GetScratch()
	for _, body := range decideBodies {
		checkDecideDecoder(t, sc, []byte(body))
	}
	// The decoder decodes these itself (and is not left to encoding/json).
	for _, body := range []string{front.DecideExample, `{"POLICY":"p","attributes":{"a":null},"cost":-0}`, `{"policy":"\ud83d\ude00\u00e9"}`} {
		if !sc.decode([]byte(body)) {
			t.Errorf("the hand decoder leaves %s to encoding/json", body)
		}
	}
}

// FuzzDecideDecoder checks that the hand decoder of decide requests and
// encoding/json, with DecodeJSON's checks, agree on every body: both accept
// it with the same value, or both reject it with the same problem.
// encoding/json alone accepts more: the bodies whose text it would read
// with U+FFFD in place of bytes that are not UTF-8 or of an escape of half
// a surrogate pair, which DecodeJSON rejects after it.
func FuzzDecideDecoder(f *testing.F) {
	for _, body := range decideBodies {
		f.Add([]byte(body))
	}
	sc := &Scratch{attrs: map[string]string{}} // reused, as the server reuses it
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecideDecoder(t, sc, body)
	})
}
