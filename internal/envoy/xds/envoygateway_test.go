package xds_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
)

// envoyGatewayResources returns the resources of Envoy Gateway's
// translator tests (internal/envoy/testdata/envoygateway, see its NOTICE):
// each YAML document of each file, by file.
func envoyGatewayResources(t *testing.T) map[string][][]byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "testdata", "envoygateway", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files: %v", err)
	}
	out := map[string][][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			b, err := yaml.Marshal(&doc)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], b)
		}
	}
	return out
}

// resourceOf reads a YAML document as the RateLimitConfig it writes out
// (its keys are the protocol's; value_to_metric and share_threshold, which
// the protocol lacks, are dropped).
func resourceOf(t *testing.T, doc []byte) *rlsconfv3.RateLimitConfig {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rlsconfv3.RateLimitConfig{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(j, rc); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return rc
}

// TestEnvoyGatewayResources: every resource Envoy Gateway's translator
// makes in its tests loads, as a file as it writes it and as the resource
// it pushes, to the same limits.
func TestEnvoyGatewayResources(t *testing.T) {
	n := 0
	for file, docs := range envoyGatewayResources(t) {
		for i, doc := range docs {
			n++
			asFile, err := envoy.Parse([]envoy.Source{{Name: file, Data: doc}}, envoy.LoadOptions{})
			if err != nil {
				t.Errorf("%s, document %d, as a file: %v", file, i+1, err)
				continue
			}
			srcs, err := xds.Sources(anys(t, resourceOf(t, doc)))
			if err != nil {
				t.Fatal(err)
			}
			pushed, err := envoy.Parse(srcs, envoy.LoadOptions{})
			if err != nil {
				t.Errorf("%s, document %d, pushed: %v\n%s", file, i+1, err, srcs[0].Data)
				continue
			}
			if asFile.Dump() != pushed.Dump() || asFile.Dump() == "" {
				t.Errorf("%s, document %d: as a file\n%s\npushed\n%s", file, i+1, asFile.Dump(), pushed.Dump())
			}
		}
	}
	t.Logf("%d resources of Envoy Gateway's translator tests load alike as files and pushed", n)
}
