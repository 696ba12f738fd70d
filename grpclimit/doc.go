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
// proceeds. The failures are logged by outage, not by call: the first with
// its error, then a summary every 10 s while they go on, then one line when
// the store answers again (see Config.Logger). A Limiter with a fallback
// store decides from it instead, and its denials are ResourceExhausted like
// any other. A shadow policy never denies, even then.
//
// A key function that finds no value reports its attribute absent
// (ErrMissingKey), and the Limiter decides whether a rule needs it; one
// that does fails the call with codes.InvalidArgument, and nothing is
// recorded in any policy. A key function that cannot read its attribute,
// or a value that is not valid UTF-8, fails the call with
// codes.InvalidArgument too.
//
// Key functions read a call's metadata, method and peer, never its
// request message. A unary call's request is decoded by the server's codec
// before the interceptor runs, so one that the codec refuses is never
// decided and records nothing; its status is the codec's choice, not the
// interceptor's. With grpc-go's protobuf codec, a request whose proto3
// string field is not valid UTF-8 fails that way with codes.Internal.
// Answering codes.InvalidArgument instead takes a codec that passes those
// bytes on (grpc.ForceServerCodecV2) and handlers that check every string
// field themselves, since they then receive strings protobuf would have
// refused; sluice serve does this for its own services. A stream is decided
// when it opens, before any of its messages is decoded.
//
// Client addresses come from the peer, or, behind trusted proxies, from the
// forwarding metadata, by the rules of httplimit.IPResolver (see the
// httplimit package documentation): ClientIP applies them to gRPC.
package grpclimit
