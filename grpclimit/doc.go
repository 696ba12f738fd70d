// Package grpclimit limits gRPC servers with a sluice.Limiter: unary and
// stream server interceptors that read a request's attributes from its
// metadata, method and peer, decide it against one or more policies, and
// refuse a denied call with codes.ResourceExhausted.
//
//	ic, err := grpclimit.New(grpclimit.Config{
//		Limiter:  lim,
//		Policies: []*sluice.Policy{&perClient},
//		Keys:     map[string]grpclimit.KeyFunc{"client": grpclimit.ClientIP(clients)},
//	})
//	...
//	srv := grpc.NewServer(grpc.UnaryInterceptor(ic.Unary), grpc.StreamInterceptor(ic.Stream))
//
// A denied call's status carries a google.rpc.RetryInfo detail with the
// time until a retry could be admitted, and a google.rpc.QuotaFailure
// detail naming the policy and the rules that did not fit. A stream is
// decided once, when it opens, with cost 1.
//
// When the store fails, the Limiter's failure policy decides: under deny
// (the default) the call fails with codes.Unavailable, under allow it
// proceeds; the error is logged either way. A Limiter with a fallback store
// decides from it instead, and its denials are ResourceExhausted like any
// other. A shadow policy never denies, even then.
//
// A key function that finds no value reports its attribute absent
// (ErrMissingKey), and the Limiter decides whether a rule needs it; one
// that does fails the call with codes.InvalidArgument, and nothing is
// recorded in any policy. A key function that cannot read its attribute,
// or a value that is not valid UTF-8, fails the call with
// codes.InvalidArgument too.
//
// Client addresses come from the peer, or, behind trusted proxies, from the
// forwarding metadata, by the rules of httplimit.IPResolver (see the
// httplimit package documentation): ClientIP applies them to gRPC.
package grpclimit
