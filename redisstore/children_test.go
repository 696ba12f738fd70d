package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// runChildren runs n copies of this test binary running only the test
// named run, with env added to their environment. Every child connects,
// prints "ready" and waits for its stdin to close, so that all of them
// start deciding at the same time; line is called with each later line a
// child prints.
func runChildren(t *testing.T, ctx context.Context, n int, run string, env []string, line func(child int, text string)) {
	t.Helper()
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
	}
	children := make([]*child, n)
	for i := range children {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	}
	for i, c := range children {
		if !c.out.Scan() || c.out.Text() != "ready" {
			t.Fatalf("child %d: got %q before ready (%v)", i, c.out.Text(), c.out.Err())
		}
	}
	for _, c := range children {
		c.stdin.Close()
	}
	for i, c := range children {
		for c.out.Scan() {
			line(i, c.out.Text())
		}
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
}

// childMain is the body of a child process of runChildren: it says "ready",
// waits for its stdin to close, then runs attempt from helperGoroutines
// goroutines, helperAttempts times each or until attempt says stop, and
// prints every line attempt returns.
func childMain(t *testing.T, attempt func() (line string, stop bool, err error)) {
	t.Helper()
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		lines []string
	)
	for range helperGoroutines {
		wg.Go(func() {
			for range helperAttempts {
				line, stop, err := attempt()
				if err != nil {
					t.Error(err)
					return
				}
				if line != "" {
					mu.Lock()
					lines = append(lines, line)
					mu.Unlock()
				}
				if stop {
					return
				}
			}
		})
	}
	wg.Wait()
	fmt.Println(strings.Join(lines, "\n"))
}
