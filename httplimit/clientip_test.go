package httplimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestResolve(t *testing.T) {
	t.Parallel()
	twoProxies := prefixes("10.0.0.1/32", "10.0.0.2/32")
	cases := []struct {
		name    string
		cfg     IPConfig
		peer    string
		headers map[string][]string
		want    string
	}{
		{
			name: "peer without proxies",
			peer: "203.0.113.7:5555",
			want: "203.0.113.7",
		},
		{
			name:    "spoofed X-Forwarded-For ignored without trusted proxies",
			peer:    "203.0.113.7:5555",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}},
			want:    "203.0.113.7",
		},
		{
			name:    "spoofed X-Forwarded-For from an untrusted peer ignored",
			cfg:     IPConfig{TrustedProxies: prefixes("10.0.0.0/8")},
			peer:    "203.0.113.7:5555",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1, 10.0.0.9"}},
			want:    "203.0.113.7",
		},
		{
			name:    "rightmost untrusted hop behind two trusted proxies",
			cfg:     IPConfig{TrustedProxies: twoProxies},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7, 10.0.0.2"}},
			want:    "203.0.113.7",
		},
		{
			name:    "hops split over field lines",
			cfg:     IPConfig{TrustedProxies: twoProxies},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Forwarded-For": {"6.6.6.6", "203.0.113.7,10.0.0.2"}},
			want:    "203.0.113.7",
		},
		{
			name:    "every hop trusted: leftmost",
			cfg:     IPConfig{TrustedProxies: prefixes("10.0.0.0/8")},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Forwarded-For": {"10.0.0.3, 10.0.0.2"}},
			want:    "10.0.0.3",
		},
		{
			name: "trusted peer without header",
			cfg:  IPConfig{TrustedProxies: twoProxies},
			peer: "10.0.0.1:80",
			want: "10.0.0.1",
		},
		{
			name:    "unreadable hop stops at the last trusted address",
			cfg:     IPConfig{TrustedProxies: twoProxies},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Forwarded-For": {"203.0.113.7, not-an-ip, 10.0.0.2"}},
			want:    "10.0.0.2",
		},
		{
			name:    "empty list members skipped",
			cfg:     IPConfig{TrustedProxies: twoProxies},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Forwarded-For": {"203.0.113.7, , 10.0.0.2,"}},
			want:    "203.0.113.7",
		},
		{
			name:    "X-Forwarded-For with ports and bare IPv6",
			cfg:     IPConfig{TrustedProxies: twoProxies},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Forwarded-For": {"[2001:db8::1]:443, 10.0.0.2:8080"}},
			want:    "2001:db8::1",
		},
		{
			name:    "IPv4-mapped peer matches an IPv4 proxy",
			cfg:     IPConfig{TrustedProxies: twoProxies},
			peer:    "[::ffff:10.0.0.1]:80",
			headers: map[string][]string{"X-Forwarded-For": {"::ffff:203.0.113.7"}},
			want:    "203.0.113.7",
		},
		{
			name: "Forwarded with quoted IPv6 and ports",
			cfg:  IPConfig{TrustedProxies: twoProxies, Header: "Forwarded"},
			peer: "10.0.0.1:80",
			headers: map[string][]string{"Forwarded": {
				`for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https;by="[2001:db8::2]", For="10.0.0.2:8080"`,
			}},
			want: "2001:db8:cafe::17",
		},
		{
			name:    "Forwarded quoted IPv6 without port",
			cfg:     IPConfig{TrustedProxies: twoProxies, Header: "forwarded"},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"Forwarded": {`for="[2001:db8::17]"`}},
			want:    "2001:db8::17",
		},
		{
			name:    "Forwarded quoted comma inside a parameter",
			cfg:     IPConfig{TrustedProxies: twoProxies, Header: "Forwarded"},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"Forwarded": {`for=203.0.113.7;host="a,b\"c", for=10.0.0.2`}},
			want:    "203.0.113.7",
		},
		{
			name:    "Forwarded unknown stops at the last trusted address",
			cfg:     IPConfig{TrustedProxies: twoProxies, Header: "Forwarded"},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"Forwarded": {`for=203.0.113.7, for=unknown, for=10.0.0.2`}},
			want:    "10.0.0.2",
		},
		{
			name:    "Forwarded element without for stops the walk",
			cfg:     IPConfig{TrustedProxies: twoProxies, Header: "Forwarded"},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"Forwarded": {`for=203.0.113.7, proto=https`}},
			want:    "10.0.0.1",
		},
		{
			name:    "Forwarded unquoted IPv6 is malformed",
			cfg:     IPConfig{TrustedProxies: twoProxies, Header: "Forwarded"},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"Forwarded": {`for=[2001:db8::1]`}},
			want:    "10.0.0.1",
		},
		{
			name: "Forwarded ignored when X-Forwarded-For is configured",
			cfg:  IPConfig{TrustedProxies: twoProxies},
			peer: "10.0.0.1:80",
			headers: map[string][]string{
				"Forwarded":       {"for=6.6.6.6"},
				"X-Forwarded-For": {"203.0.113.7"},
			},
			want: "203.0.113.7",
		},
		{
			name: "X-Forwarded-For ignored when Forwarded is configured",
			cfg:  IPConfig{TrustedProxies: twoProxies, Header: "Forwarded"},
			peer: "10.0.0.1:80",
			headers: map[string][]string{
				"X-Forwarded-For": {"6.6.6.6"},
			},
			want: "10.0.0.1",
		},
		{
			name:    "custom single-address header",
			cfg:     IPConfig{TrustedProxies: twoProxies, Header: "x-real-ip"},
			peer:    "10.0.0.1:80",
			headers: map[string][]string{"X-Real-Ip": {"203.0.113.7"}},
			want:    "203.0.113.7",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, err := NewIPResolver(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = c.peer
			for k, v := range c.headers {
				req.Header[k] = v
			}
			got, err := res.Resolve(req)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got.String() != c.want {
				t.Errorf("Resolve = %v, want %v", got, c.want)
			}
		})
	}
}

func TestKeyGroupsByPrefix(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  IPConfig
		addr string
		want string
	}{
		{"IPv4 default one address", IPConfig{}, "203.0.113.7", "203.0.113.7"},
		{"IPv4 /24", IPConfig{IPv4Bits: 24}, "203.0.113.7", "203.0.113.0/24"},
		{"IPv6 default /64", IPConfig{}, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"},
		{"IPv6 rotation inside the /64", IPConfig{}, "2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"IPv6 next /64", IPConfig{}, "2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"IPv6 /56", IPConfig{IPv6Bits: 56}, "2001:db8:1:2ff::1", "2001:db8:1:200::/56"},
		{"IPv6 /128", IPConfig{IPv6Bits: 128}, "2001:db8::1", "2001:db8::1"},
		{"zone dropped", IPConfig{}, "fe80::1%eth0", "fe80::/64"},
		{"mapped IPv4 counted as IPv4", IPConfig{}, "::ffff:203.0.113.7", "203.0.113.7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, err := NewIPResolver(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.KeyOf(netip.MustParseAddr(c.addr)); got != c.want {
				t.Errorf("KeyOf(%s) = %q, want %q", c.addr, got, c.want)
			}
		})
	}
}

func TestNewIPResolverErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  IPConfig
		want string
	}{
		{"IPv4 bits too large", IPConfig{IPv4Bits: 33}, "IPv4Bits is 33"},
		{"IPv4 bits negative", IPConfig{IPv4Bits: -1}, "IPv4Bits is -1"},
		{"IPv6 bits too large", IPConfig{IPv6Bits: 129}, "IPv6Bits is 129"},
		{"invalid prefix", IPConfig{TrustedProxies: []netip.Prefix{{}}}, "is invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewIPResolver(c.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "httplimit: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewIPResolver error = %v, want one starting with httplimit: and containing %q", err, c.want)
			}
		})
	}
}

func TestResolveNonIPPeer(t *testing.T) {
	t.Parallel()
	res, err := NewIPResolver(IPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "@"
	if _, err := res.Key(req); err == nil {
		t.Error("Key of a request from a Unix socket succeeded, want an error")
	}
}

func TestTrustedMappedPrefix(t *testing.T) {
	t.Parallel()
	res, err := NewIPResolver(IPConfig{TrustedProxies: prefixes("::ffff:10.0.0.0/104")})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Trusted(netip.MustParseAddr("10.1.2.3")) {
		t.Error("10.1.2.3 not trusted under ::ffff:10.0.0.0/104")
	}
}

// FuzzClientAddr checks that parsing never panics and always yields a
// valid address, whatever the header says.
func FuzzClientAddr(f *testing.F) {
	f.Add("6.6.6.6, 203.0.113.7, 10.0.0.2", false)
	f.Add(`for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2`, true)
	f.Add(`for="\"unterminated`, true)
	f.Add(`;;,,=;for=;`, true)
	f.Fuzz(func(t *testing.T, header string, forwarded bool) {
		cfg := IPConfig{TrustedProxies: prefixes("10.0.0.0/8")}
		if forwarded {
			cfg.Header = "Forwarded"
		}
		res, err := NewIPResolver(cfg)
		if err != nil {
			t.Fatal(err)
		}
		peer := netip.MustParseAddr("10.0.0.1")
		got := res.ClientAddr(peer, []string{header})
		if !got.IsValid() {
			t.Fatalf("ClientAddr(%q) is not a valid address", header)
		}
		if got != peer && !res.Trusted(got) {
			// An untrusted answer must be a hop of the header, not
			// something made up: resolving again from it as the peer
			// gives it back.
			if again := res.ClientAddr(got, []string{header}); again != got {
				t.Errorf("ClientAddr(%q) = %v, but from that peer it is %v", header, got, again)
			}
		}
	})
}
