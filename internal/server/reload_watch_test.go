package server

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// TestWatchChangesZeroIntervalPollsNever checks that an interval of 0
// reloads on a signal only: what `sluice serve --watch 0` promises.
func TestWatchChangesZeroIntervalPollsNever(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	signal := make(chan os.Signal)
	reloads := make(chan bool)
	sums := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchChanges(ctx, 0, signal, func() []byte { sums++; return []byte{byte(sums)} }, func(signalled bool) { reloads <- signalled })
	}()
	signal <- syscall.SIGHUP
	if signalled := <-reloads; !signalled {
		t.Error("a reload on a signal reported as a change")
	}
	cancel()
	<-done
	if sums != 2 {
		t.Errorf("the content was read %d times, want twice (at the start and on the signal): an interval of 0 polls never", sums)
	}
}
