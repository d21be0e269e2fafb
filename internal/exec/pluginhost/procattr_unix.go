//go:build unix && !linux

package pluginhost

import "syscall"

// procAttr puts a plugin in its own process group. Outside Linux there is
// no parent-death signal: a plugin may outlive a gateway killed by SIGKILL.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
