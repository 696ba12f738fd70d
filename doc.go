// Package sluice is a distributed rate limiter: exact sliding-window logs,
// hierarchical limits decided atomically, minimum gaps between events, kept in
// memory for one process or in Redis for many.
//
// The vocabulary:
//
//   - A Rule is one limit: at most Limit units of cost in any window of length
//     Window, optionally with a MinGap between events, kept per combination of
//     the request attributes named in By. A rule may apply to some requests
//     only (Optional, Unless, Match) and give matching values a limit of
//     their own (Overrides): per user when the user is known and per IP
//     otherwise, ten times the free plan's limit for the paid plan, a limit
//     of 0 to block. A rule counts by an Algorithm: the exact Log (the
//     default), GCRA (a token bucket in one small key, for large limits over
//     many keys) or SlidingCounter (an estimate from two fixed windows). A
//     rule may Spread one hot key (a tenant that takes all the traffic) over
//     several Redis Cluster slots.
//   - A Policy is a set of rules decided together: a request is allowed only
//     when every rule that applies fits, and is then recorded in all of them.
//   - A Decision is the answer: allowed or not, which rule denied and why
//     (its window is full, or the request came too soon after the last
//     event), what is left, when to retry, and the status of every rule.
//     Its figures are a promise, the same on every store: waiting
//     RetryAfter and sending the same request again admits it.
//   - A Schedule is a leaky-bucket queue: each Reservation gets the next free
//     slot at a fixed rate, or is rejected when its wait would be too long.
//   - A Limiter resolves a policy and a request's attributes into the windows
//     the request must fit, validates it, applies the policy's modes and the
//     failure policy, and asks its store to decide. Under a flood of requests
//     over their limit, a policy that sets CacheDenials is answered from the
//     Limiter's deny cache until the window has room again: one store call
//     per key and wait instead of one per request.
//   - A store keeps the windows and decides atomically: memstore keeps them
//     in this process; redisstore keeps them in Redis, where every instance
//     of a service shares them and Redis's own clock orders events. Package
//     store is the contract between the Limiter and a store, for those who
//     write one; storetest checks it.
//
// A denial is a value (Decision.Allowed false); an error is a failure or bad
// input, and errors for bad input wrap the package's sentinel errors.
package sluice
