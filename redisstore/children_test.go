package redisstore_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
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
