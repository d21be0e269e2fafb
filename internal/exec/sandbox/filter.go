package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	"aimon.dev/gw/internal/exec/sandbox/trace"
	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Refused are the system calls that reach outside the sandbox's
// namespaces or into the kernel's shared state; a command that makes one
// gets EPERM (rule R8). Names this architecture lacks are left out.
var Refused = []string{
	// Mounts: the sandbox's file system is what bwrap made of it.
	"mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// Namespaces: no way into the gateway's, and no new ones to gain capabilities in.
	"setns", "unshare",
	// Other processes and the kernel's keys, modules, tracing and clocks.
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "vhangup",
	"iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"uselib", "_sysctl", "nfsservctl",
}

// UntracedTrap is the seccomp data of the trap on clone(CLONE_UNTRACED):
// the SIGSYS's si_errno, by which the tracer knows it (trace.UntracedTrap).
const UntracedTrap = trace.UntracedTrap

// newNamespaces are the clone flags that make a namespace.
const newNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

var filter struct {
	once sync.Once
	prog []byte
	err  error
}

// program is the seccomp filter as bwrap reads it: struct sock_filter
// records in the machine's byte order.
func program() ([]byte, error) {
	filter.once.Do(func() { filter.prog, filter.err = assemble() })
	return filter.prog, filter.err
}

func assemble() ([]byte, error) {
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("no seccomp filter for this architecture: %w", err)
	}
	var names []string
	for _, n := range Refused {
		if _, ok := native.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	groups := []seccomp.SyscallGroup{{Names: names, Action: seccomp.ActionErrno}}
	if _, ok := native.SyscallNames["clone"]; ok {
		groups[0].NamesWithCondtions = []seccomp.NameWithConditions{{Name: "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: newNamespaces}}}}
	}
	if _, ok := native.SyscallNames["clone3"]; ok {
		// clone3's flags are in memory the filter cannot read: ENOSYS sends
		// the C library back to clone, whose flags it can.
		groups = append(groups, seccomp.SyscallGroup{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)})
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	body, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("the seccomp filter does not assemble: %w", err)
	}
	// Written here rather than as the library's argument conditions: those
	// compare all 64 bits, and the kernel reads ioctl's request as 32, so
	// TIOCSTI with a high bit set would pass them.
	ioctl, ok := native.SyscallNames["ioctl"]
	if !ok {
		return nil, fmt.Errorf("no ioctl system call on %s", native.Name)
	}
	// seccomp_data: nr, arch, ip, then args[6]; the low half of an
	// argument comes second on a big-endian machine.
	low := func(n uint32) uint32 {
		if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
			return 16 + 8*n + 4
		}
		return 16 + 8*n
	}
	eperm := bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.EPERM)}
	head := []bpf.Instruction{
		// Another architecture's calls (i386 through int 0x80) would have
		// other numbers: the library lets them through, this kills them.
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
		bpf.LoadAbsolute{Off: 0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ioctl), SkipTrue: 4},
		bpf.LoadAbsolute{Off: low(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.TIOCLINUX, SkipTrue: 1},
		eperm,
	}
	if clone, ok := native.SyscallNames["clone"]; ok {
		// A child cloned with CLONE_UNTRACED is not attached by the
		// tracer's TRACECLONE/FORK/VFORK (kernel_clone reports no event
		// for it), so what it executed would never be judged (rule P16).
		// A trap rather than an errno: the SIGSYS stops the process at the
		// tracer, which says why the command failed (package trace). Here
		// and not as the library's conditions, which leave an argument, not
		// the call's number, in the register for the groups after them;
		// the low half is what the kernel reads (clone's flags are 32 bits,
		// kernel_clone_args' lower_32_bits).
		head = append(head,
			bpf.LoadAbsolute{Off: 0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(clone), SkipTrue: 3},
			bpf.LoadAbsolute{Off: low(0), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_UNTRACED, SkipFalse: 1},
			bpf.RetConstant{Val: uint32(seccomp.ActionTrap) | UntracedTrap},
		)
	}
	raw, err := bpf.Assemble(append(head, body...))
	if err != nil {
		return nil, fmt.Errorf("the seccomp filter does not assemble: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// filterFile is a fresh descriptor bwrap reads the filter from to its end.
func filterFile() (*os.File, error) {
	prog, err := program()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// The filter is far smaller than a pipe's buffer: the write never blocks.
	_, err = w.Write(prog)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
