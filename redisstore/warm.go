package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/store"
)

// Warm makes the store's first decisions as fast as its later ones. It
// loads every script the store runs into the script cache of every node its
// client knows (a Cluster's masters, and its replicas when the client lists
// them; a standalone or Sentinel master), and the function library
// (decide.lua, lease.lua, finish.lua) where the server has functions
// (function.go), over the connections the
// store's calls will use, which it opens on the way; a Cluster client has
// learnt the slot map when it was made. It returns nil only when every node
// has every script.
//
// Without it a fresh process's first decisions each find their script
// missing on their master (NOSCRIPT) and send its source: under load the
// first of them miss their deadline and are decided by the failure policy.
// sluice serve calls Warm before it reports ready (/readyz and gRPC health),
// and again every few seconds, so that a node that joins after a failover
// or a SCRIPT FLUSH is warmed as well; a Warm that finds every script in
// place costs one SCRIPT EXISTS and one FUNCTION LOAD refused as a
// duplicate per node.
//
// A store made by NewFromEvaler cannot reach the nodes: Warm returns nil,
// and its scripts are loaded by their first calls.
func (s *Store) Warm(ctx context.Context) error {
	if s.client == nil {
		return nil
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	nodes := s.client.Nodes()
	if len(nodes) == 0 {
		return errors.New("redisstore: warming: the client knows no Redis node; check the addresses")
	}
	errs := make([]error, 0, len(nodes))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for addr, node := range nodes {
		wg.Go(func() {
			err := loadScripts(ctx, node)
			if err == nil {
				err = s.loadFunctions(ctx, node)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return fmt.Errorf("redisstore: loading the scripts: %w", errors.Join(errs...))
	}
	return nil
}

// loadScripts loads into node's script cache each of allScripts it does
// not hold.
func loadScripts(ctx context.Context, node rueidis.Client) error {
	held, err := node.Do(ctx, node.B().ScriptExists().Sha1(allSHAs...).Build()).AsIntSlice()
	if err != nil {
		return err
	}
	if len(held) != len(allSHAs) {
		return fmt.Errorf("SCRIPT EXISTS answered %d flags for %d scripts", len(held), len(allSHAs))
	}
	for i, sc := range allScripts {
		if held[i] == 1 {
			continue
		}
		sha, err := node.Do(ctx, node.B().ScriptLoad().Script(sc.src).Build()).ToString()
		if err != nil {
			return fmt.Errorf("SCRIPT LOAD %s: %w", sc.name, err)
		}
		if sha != sc.sha1 {
			return fmt.Errorf("SCRIPT LOAD %s gave SHA-1 %s, want %s", sc.name, sha, sc.sha1)
		}
	}
	return nil
}

// loadFunctions loads the function library on node, unless the store runs
// its scripts as scripts. A server without functions, or whose ACL forbids
// them to the store's user, makes the store run them as scripts; a replica,
// which refuses writes, gets the library from its master.
func (s *Store) loadFunctions(ctx context.Context, node rueidis.Client) error {
	ev, ok := s.ev.(rueidisEvaler)
	if !ok || ev.fns == nil || ev.fns.off.Load() {
		return nil
	}
	err := node.Do(ctx, node.B().FunctionLoad().FunctionCode(sluiceLibrary.src).Build()).Error()
	switch {
	case err == nil, errLibraryLoaded(err), errReadOnly(err):
		return nil
	case errNoFunctions(err):
		ev.fns.off.Store(true)
		return nil
	}
	return fmt.Errorf("FUNCTION LOAD: %w", err)
}
