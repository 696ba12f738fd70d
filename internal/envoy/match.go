package envoy

import (
	"strconv"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Match is what one request descriptor matched in its domain's tree: the
// descriptor whose rate_limit applies. The zero Match (Found false) is a
// descriptor no limit applies to.
type Match struct {
	// Found reports whether a descriptor with a rate_limit matched.
	Found bool

	// Limits are the matched descriptor's limits, in file order, and Rules
	// the names of their windows (Rule.Name): its path, then "#2", "#3"...
	Limits []Limit
	Rules  []string

	// Values are the request's values, one per entry, with the wildcard
	// pattern instead of the value for an entry matched by a wildcard with
	// share_threshold: with a rule they name the descriptor's window.
	Values []string

	// Stat is the descriptor's key in envoyproxy/ratelimit's statistics:
	// "domain.key_value.key2" (see its README, Statistics).
	Stat string

	// The descriptor's flags: rate_limit: {unlimited: true}, shadow_mode
	// and quota_mode.
	Unlimited, Shadow, Quota bool

	// Metadata is the descriptor's metadata, nil when it has none.
	Metadata *structpb.Struct
}

// Match walks the tree of domain with the entries of one descriptor, as
// envoyproxy/ratelimit does: at each level the entry's key and value
// ("key_value") first, then the wildcard values in file order (the longest
// is not preferred: the first in the file wins), then the key alone; a
// limit applies only when the last entry lands on a descriptor with a
// rate_limit. A request with more entries than the tree is deep, or fewer,
// matches nothing.
func (c *Config) Match(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) Match {
	level := c.domains[domain]
	if level == nil || len(entries) == 0 {
		return Match{}
	}
	var (
		found    *node
		values   = make([]string, len(entries))
		segments = make([]string, 0, len(entries))
		detailed = make([]string, 0, len(entries))
	)
	for i, e := range entries {
		key, value := e.GetKey(), e.GetValue()
		final := key + "_" + value
		values[i] = value
		detailed = append(detailed, final)
		next := level.children[final]
		segment := final
		if next == nil {
			for _, w := range level.wildcards {
				if strings.HasPrefix(final, strings.TrimSuffix(w, "*")) {
					next, segment = level.children[w], w
					if next.share {
						values[i] = strings.TrimPrefix(w, key+"_")
						detailed[i] = w
					} else if next.toMetric {
						segment = final
					}
					break
				}
			}
		}
		if next == nil {
			next, segment = level.children[key], key
			if next != nil && next.toMetric {
				segment = final
			}
		}
		if next == nil {
			break
		}
		segments = append(segments, segment)
		if next.limited && i == len(entries)-1 {
			found = next
		}
		if len(next.children) == 0 {
			break
		}
		level = next
	}
	if found == nil {
		return Match{}
	}
	stat := domain + "." + strings.Join(segments, ".")
	if found.detailed {
		stat = domain + "." + strings.Join(detailed, ".")
	}
	return Match{Found: true, Limits: found.limits, Rules: found.rules(), Values: values, Stat: stat,
		Unlimited: found.unlimited, Shadow: found.shadow, Quota: found.quota, Metadata: found.metadata}
}

// rules names the windows of n's limits: its path, then "#2", "#3"...
func (n *node) rules() []string {
	rules := make([]string, len(n.limits))
	for j := range n.limits {
		rules[j] = n.path
		if j > 0 {
			rules[j] += "#" + strconv.Itoa(j+1)
		}
	}
	return rules
}
