package redistest

import "syscall"

// sysProcAttr makes the kernel kill the server when the test binary dies, so
// a test killed by a timeout leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
