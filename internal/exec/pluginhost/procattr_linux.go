package pluginhost

import "syscall"

// procAttr puts a plugin in its own process group, so that a kill reaches
// what it started too, and asks the kernel to SIGKILL it when the gateway
// dies, even by SIGKILL (rule R4).
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process. The Go runtime ends a thread only when a goroutine locked to it
// (runtime.LockOSThread) exits without unlocking. Plugins are forked from a
// goroutine started for that purpose (slot.start, then go-plugin's
// Client.Start, then cmdRunner.Start), which is never locked, so its thread
// lives until the gateway exits. A plugin's own children are not covered:
// they die with its process group when the host stops it, not when the
// gateway is SIGKILLed. The runtime also closes the race of a parent dying before
// the prctl: the child checks its parent after setting the signal.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
