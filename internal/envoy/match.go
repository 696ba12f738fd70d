package envoy

import (
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match is what one request descriptor matched in its domain's tree.
type match struct {
	// node is the descriptor whose rate_limit applies; nil when none does.
	node *node

	// values are the request's values, one per entry, with the wildcard
	// pattern instead of the value for an entry matched by a wildcard with
	// share_threshold: with the node they name the descriptor's window.
	values []string

	// stat is the descriptor's key in envoyproxy/ratelimit's statistics:
	// "domain.key_value.key2" (see its README, Statistics).
	stat string
}

// match walks the tree of domain with the entries of one descriptor, as
// envoyproxy/ratelimit does: at each level the entry's key and value
// ("key_value") first, then the wildcard values in file order (the longest
// is not preferred: the first in the file wins), then the key alone; a
// limit applies only when the last entry lands on a descriptor with a
// rate_limit. A request with more entries than the tree is deep, or fewer,
// matches nothing.
func (c *Config) match(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) match {
	level := c.domains[domain]
	if level == nil || len(entries) == 0 {
		return match{}
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
		return match{}
	}
	stat := domain + "." + strings.Join(segments, ".")
	if found.detailed {
		stat = domain + "." + strings.Join(detailed, ".")
	}
	return match{node: found, values: values, stat: stat}
}

// descriptorKey is envoyproxy/ratelimit's key of a descriptor that carries
// its own limit: "domain.key_value.key2_value2".
func descriptorKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		if e.GetValue() != "" {
			b.WriteByte('_')
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
}
