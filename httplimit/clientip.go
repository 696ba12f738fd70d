package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// IPConfig configures an IPResolver. The zero value is the default: the
// client is the TCP peer, forwarding headers are ignored, IPv4 clients are
// counted one address each and IPv6 clients one /64 each.
type IPConfig struct {
	// TrustedProxies are the networks of the proxies in front of the
	// server. Only a request whose TCP peer is inside one of them has its
	// forwarding header read, and only the hops those proxies appended are
	// believed. Default none: the TCP peer is the client.
	TrustedProxies []netip.Prefix

	// Header is the forwarding header the trusted proxies write.
	// "Forwarded" is parsed as RFC 7239 (the "for" parameter of each
	// element); any other name is parsed as a comma-separated list of
	// addresses, like X-Forwarded-For. Only this one header is read: a
	// client can send any header it likes, and a proxy that appends to one
	// header passes the others through untouched. Default
	// "X-Forwarded-For".
	Header string

	// IPv4Bits is the prefix length IPv4 clients are grouped by. Default
	// 32: one address is one client.
	IPv4Bits int

	// IPv6Bits is the prefix length IPv6 clients are grouped by. Default
	// 64, the usual allocation of one subscriber: a client that rotates
	// through the addresses of its /64 is still one client.
	IPv6Bits int
}

// IPResolver finds the client address of a request: the TCP peer, or,
// when the peer is a trusted proxy, the rightmost address in the forwarding
// header that is not itself a trusted proxy. Everything left of that address
// was written by the client or by proxies nobody vouches for, so it is never
// read.
//
// An IPResolver is safe for concurrent use. Its zero value is not usable;
// create one with NewIPResolver.
type IPResolver struct {
	trusted   []netip.Prefix
	header    string
	forwarded bool
	v4, v6    int
}

// NewIPResolver returns a resolver configured by cfg. It reports an error
// for an invalid trusted prefix or a prefix length out of range.
func NewIPResolver(cfg IPConfig) (*IPResolver, error) {
	r := &IPResolver{
		header: textproto.CanonicalMIMEHeaderKey(cfg.Header),
		v4:     cfg.IPv4Bits,
		v6:     cfg.IPv6Bits,
	}
	if r.header == "" {
		r.header = "X-Forwarded-For"
	}
	r.forwarded = r.header == "Forwarded"
	if r.v4 == 0 {
		r.v4 = 32
	}
	if r.v6 == 0 {
		r.v6 = 64
	}
	if r.v4 < 1 || r.v4 > 32 {
		return nil, fmt.Errorf("httplimit: IPv4Bits is %d; use 1 to 32 (0 means 32)", cfg.IPv4Bits)
	}
	if r.v6 < 1 || r.v6 > 128 {
		return nil, fmt.Errorf("httplimit: IPv6Bits is %d; use 1 to 128 (0 means 64)", cfg.IPv6Bits)
	}
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("httplimit: trusted proxy prefix %v is invalid", p)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// Addresses are compared unmapped; trust the IPv4 network.
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.trusted = append(r.trusted, p.Masked())
	}
	return r, nil
}

// Header returns the canonical name of the forwarding header r reads.
func (r *IPResolver) Header() string { return r.header }

// Trusted reports whether addr belongs to a trusted proxy.
func (r *IPResolver) Trusted(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range r.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// errPeer reports a request whose RemoteAddr is not an IP address.
var errPeer = errors.New("httplimit: the request's peer address is not an IP address")

// Resolve returns the client address of req: its TCP peer (req.RemoteAddr)
// unless the peer is a trusted proxy, in which case the rightmost untrusted
// hop of the forwarding header. It reports an error only when RemoteAddr is
// not an IP address (a Unix socket, say).
func (r *IPResolver) Resolve(req *http.Request) (netip.Addr, error) {
	peer, ok := parseNode(req.RemoteAddr)
	if !ok {
		return netip.Addr{}, errPeer
	}
	if !r.Trusted(peer) {
		return peer, nil
	}
	return r.ClientAddr(peer, req.Header[r.header]), nil
}

// ClientAddr returns the client address given the TCP peer and the values
// of the forwarding header (every field line, in the order received). It is
// Resolve for callers that do not hold an *http.Request, such as a gRPC
// server reading the peer and metadata.
//
// When peer is not trusted it is the client. Otherwise the hops are read
// from right to left: each trusted hop passes the question one hop further
// left, and the first untrusted hop is the client. A hop that is not an
// address ("unknown", an obfuscated identifier, garbage) ends the walk at
// the last trusted address seen, so an unreadable header never lets a client
// pick its identity. When every hop is trusted, the leftmost is the client.
func (r *IPResolver) ClientAddr(peer netip.Addr, values []string) netip.Addr {
	client := peer.Unmap()
	if !r.Trusted(client) {
		return client
	}
	if r.forwarded {
		hops := forwardedFor(values)
		for i := len(hops) - 1; i >= 0; i-- {
			a, ok := parseNode(hops[i])
			if !ok {
				return client
			}
			client = a
			if !r.Trusted(a) {
				return a
			}
		}
		return client
	}
	// X-Forwarded-For style: walk right to left without allocating.
	for v := len(values) - 1; v >= 0; v-- {
		s := values[v]
		for len(s) > 0 {
			hop := s
			if i := strings.LastIndexByte(s, ','); i >= 0 {
				hop, s = s[i+1:], s[:i]
			} else {
				s = ""
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue // empty list members are allowed and mean nothing
			}
			a, ok := parseNode(hop)
			if !ok {
				return client
			}
			client = a
			if !r.Trusted(a) {
				return a
			}
		}
	}
	return client
}

// Prefix returns the network addr is counted under: addr masked to the IPv4
// or IPv6 prefix length.
func (r *IPResolver) Prefix(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap().WithZone("")
	bits := r.v6
	if addr.Is4() {
		bits = r.v4
	}
	p, _ := addr.Prefix(bits)
	return p
}

// Key is a KeyFunc: it returns the client's group as a string, the address
// itself when the prefix covers one address ("203.0.113.7") and the
// network otherwise ("2001:db8:1:2::/64").
func (r *IPResolver) Key(req *http.Request) (string, error) {
	a, err := r.Resolve(req)
	if err != nil {
		return "", err
	}
	return r.KeyOf(a), nil
}

// KeyOf returns the attribute value of the client at addr, as Key does.
func (r *IPResolver) KeyOf(addr netip.Addr) string {
	p := r.Prefix(addr)
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// parseNode parses one hop: an IPv4 or IPv6 address, optionally with a
// port ("192.0.2.1:8080", "[2001:db8::1]:443"), or a bracketed IPv6 address
// without one. The address is returned unmapped and without zone.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	var err error
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		a, err = netip.ParseAddr(s[1:end])
		if err == nil && !a.Is6() {
			return netip.Addr{}, false
		}
	default:
		a, err = netip.ParseAddr(s)
		if err != nil {
			var ap netip.AddrPort
			ap, err = netip.ParseAddrPort(s)
			a = ap.Addr()
		}
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// validPort reports whether s is ":" followed by 1 to 5 digits.
func validPort(s string) bool {
	if len(s) < 2 || len(s) > 6 || s[0] != ':' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// forwardedFor returns the "for" value of every element of RFC 7239
// Forwarded field values, in order, unquoted. An element without a "for"
// parameter, or one that cannot be parsed, yields an empty string, which
// parseNode rejects: the walk stops there.
func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		p := forwardedParser{s: v}
		for {
			hop, empty, more := p.element()
			if !empty {
				hops = append(hops, hop)
			}
			if !more {
				break
			}
		}
	}
	return hops
}

// forwardedParser reads forwarded-element values from one field line:
//
//	forwarded-element = [ pair ] *( ";" [ pair ] )
//	pair              = token "=" ( token / quoted-string )
type forwardedParser struct {
	s string
	i int
}

// element parses one element and the list separator after it. It returns
// the element's "for" value (empty when it has none or is malformed),
// whether the element was empty (list syntax allows empty members, which
// mean nothing), and whether another element follows.
func (p *forwardedParser) element() (forValue string, empty, more bool) {
	bad := false
	start := p.i
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] == ',' {
			empty = strings.Trim(p.s[start:p.i], " \t;") == ""
			more = p.i < len(p.s)
			if more {
				p.i++
			}
			if bad {
				forValue = ""
			}
			return forValue, empty, more
		}
		if p.s[p.i] == ';' {
			p.i++
			continue
		}
		name := p.token()
		p.skipSpace()
		if name == "" || p.i >= len(p.s) || p.s[p.i] != '=' {
			bad = true
			p.skipToSeparator()
			continue
		}
		p.i++
		p.skipSpace()
		value, ok := p.value()
		if !ok {
			bad = true
			p.skipToSeparator()
			continue
		}
		if strings.EqualFold(name, "for") {
			if forValue != "" {
				bad = true // two "for" parameters: ambiguous
			}
			forValue = value
		}
	}
}

func (p *forwardedParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// skipToSeparator moves to the next ';' or ',' outside a quoted string.
func (p *forwardedParser) skipToSeparator() {
	quoted := false
	for ; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		switch {
		case quoted && c == '\\':
			p.i++
		case c == '"':
			quoted = !quoted
		case !quoted && (c == ';' || c == ','):
			return
		}
	}
	p.i = len(p.s) // a trailing backslash may have stepped past the end
}

func (p *forwardedParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// value parses a token or a quoted string.
func (p *forwardedParser) value() (string, bool) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		p.i++
		var b strings.Builder
		for p.i < len(p.s) {
			c := p.s[p.i]
			p.i++
			switch c {
			case '"':
				return b.String(), true
			case '\\':
				if p.i >= len(p.s) {
					return "", false
				}
				c = p.s[p.i]
				p.i++
			}
			b.WriteByte(c)
		}
		return "", false // unterminated
	}
	v := p.token()
	return v, v != ""
}

// isTokenChar reports whether c is a tchar (RFC 9110, section 5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
