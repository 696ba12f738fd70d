package xds

import (
	"bytes"
	"fmt"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicerate/sluice/internal/envoy"
)

// TypeURL is the type of the resources the client asks for: one
// envoyproxy/ratelimit configuration (a domain and its descriptors) each.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// SourceName is the name a resource's document goes by in the loader's
// messages: "xds:" and the resource's name.
func SourceName(resource string) string { return "xds:" + resource }

// Sources turns a response's resources into the documents the loader reads
// (envoy.Parse), one per resource, each the resource written as the YAML
// file envoyproxy/ratelimit would read: the loader validates them as it
// validates files, and its messages name the resource (line and column
// count in that YAML). A resource that is not a RateLimitConfig is an
// error.
func Sources(resources []*anypb.Any) ([]envoy.Source, error) {
	docs := make([]envoy.Source, 0, len(resources))
	for i, res := range resources {
		if res.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("xds: resource %d is a %s; this client takes %s only", i+1, res.GetTypeUrl(), TypeURL)
		}
		var rc rlsconfv3.RateLimitConfig
		if err := anypb.UnmarshalTo(res, &rc, proto.UnmarshalOptions{}); err != nil {
			return nil, fmt.Errorf("xds: resource %d is not a RateLimitConfig: %w", i+1, err)
		}
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(fileOf(&rc)); err != nil {
			return nil, fmt.Errorf("xds: resource %q: %w", rc.GetName(), err)
		}
		docs = append(docs, envoy.Source{Name: SourceName(rc.GetName()), Data: b.Bytes()})
	}
	return docs, nil
}

// The file a resource stands for, with envoyproxy/ratelimit's keys (its
// ConfigXdsProtoToYaml).
type (
	fileYAML struct {
		Domain      string           `yaml:"domain"`
		Descriptors []descriptorYAML `yaml:"descriptors,omitempty"`
	}
	descriptorYAML struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value,omitempty"`
		RateLimit      *limitYAML       `yaml:"rate_limit,omitempty"`
		ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
		QuotaMode      bool             `yaml:"quota_mode,omitempty"`
		DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
		Metadata       map[string]any   `yaml:"metadata,omitempty"`
		Descriptors    []descriptorYAML `yaml:"descriptors,omitempty"`
	}
	limitYAML struct {
		Unit            string        `yaml:"unit,omitempty"`
		RequestsPerUnit *uint32       `yaml:"requests_per_unit,omitempty"`
		Unlimited       bool          `yaml:"unlimited,omitempty"`
		Name            string        `yaml:"name,omitempty"`
		Replaces        []replaceYAML `yaml:"replaces,omitempty"`
	}
	replaceYAML struct {
		Name string `yaml:"name"`
	}
)

func fileOf(rc *rlsconfv3.RateLimitConfig) fileYAML {
	return fileYAML{Domain: rc.GetDomain(), Descriptors: descriptorsOf(rc.GetDescriptors())}
}

func descriptorsOf(ds []*rlsconfv3.RateLimitDescriptor) []descriptorYAML {
	out := make([]descriptorYAML, 0, len(ds))
	for _, d := range ds {
		y := descriptorYAML{Key: d.GetKey(), Value: d.GetValue(), RateLimit: limitOf(d.GetRateLimit()), ShadowMode: d.GetShadowMode(),
			QuotaMode: d.GetQuotaMode(), DetailedMetric: d.GetDetailedMetric(), Descriptors: descriptorsOf(d.GetDescriptors())}
		if m := d.GetMetadata(); m != nil {
			y.Metadata = m.AsMap()
		}
		out = append(out, y)
	}
	return out
}

// limitOf is a policy as its file writes it: no unit for UNKNOWN (the
// protocol's zero), and, as envoyproxy/ratelimit, no requests_per_unit
// when unlimited.
func limitOf(p *rlsconfv3.RateLimitPolicy) *limitYAML {
	if p == nil {
		return nil
	}
	y := &limitYAML{Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if p.GetUnit() != rlsconfv3.RateLimitUnit_UNKNOWN {
		y.Unit = p.GetUnit().String()
	}
	if !p.GetUnlimited() {
		n := p.GetRequestsPerUnit()
		y.RequestsPerUnit = &n
	}
	for _, r := range p.GetReplaces() {
		y.Replaces = append(y.Replaces, replaceYAML{Name: r.GetName()})
	}
	return y
}
