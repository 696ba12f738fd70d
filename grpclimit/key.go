package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluicerate/sluice/httplimit"
)

// KeyFunc reads the value of one attribute of a call from its context
// (metadata, peer) and full method name ("/pkg.Service/Method"). An error
// that wraps ErrMissingKey reports that the call does not carry the
// attribute: the interceptor leaves it out and the Limiter decides whether
// a rule needs it (one that does fails the call with
// codes.InvalidArgument, and nothing is recorded). Any other error reports
// that the attribute cannot be read: the call fails with
// codes.InvalidArgument at once and nothing is decided. A value must be
// valid UTF-8, or the call fails with codes.InvalidArgument.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// ErrMissingKey reports a call that lacks an attribute a rule is keyed on.
// Key functions wrap it to report their attribute absent.
var ErrMissingKey = errors.New("grpclimit: call lacks a rate-limit key")

// Metadata returns a KeyFunc that reads the first value of the incoming
// metadata key, an API key for example. Keys are lower-cased, as gRPC
// stores them. A missing or empty value is an error wrapping ErrMissingKey.
func Metadata(key string) KeyFunc {
	key = strings.ToLower(key)
	return func(ctx context.Context, _ string) (string, error) {
		if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("%w: no %q metadata", ErrMissingKey, key)
	}
}

// Method is a KeyFunc that returns the call's full method name, so each
// method has its own window.
func Method(_ context.Context, fullMethod string) (string, error) {
	if fullMethod == "" {
		return "", fmt.Errorf("%w: no method name", ErrMissingKey)
	}
	return fullMethod, nil
}

// ClientIP returns a KeyFunc that identifies the client by address, grouped
// by the resolver's prefix lengths. The address is the peer's, unless the
// peer is one of the resolver's trusted proxies: then it is the rightmost
// untrusted hop of the metadata named like the resolver's header
// ("x-forwarded-for" by default). A call without a peer IP address is an
// error wrapping ErrMissingKey.
func ClientIP(res *httplimit.IPResolver) KeyFunc {
	key := strings.ToLower(res.Header())
	return func(ctx context.Context, _ string) (string, error) {
		addr, ok := peerAddr(ctx)
		if !ok {
			return "", fmt.Errorf("%w: the call has no peer IP address", ErrMissingKey)
		}
		if res.Trusted(addr) {
			addr = res.ClientAddr(addr, metadata.ValueFromIncomingContext(ctx, key))
		}
		return res.KeyOf(addr), nil
	}
}

// peerAddr returns the IP address of the call's peer.
func peerAddr(ctx context.Context) (netip.Addr, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, false
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		a, ok := netip.AddrFromSlice(tcp.IP)
		return a.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}
