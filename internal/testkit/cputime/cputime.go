// Package cputime is what the benchmarks that report ratios on a shared
// machine measure with: processor time, which other processes do not
// inflate as they do wall time, and the median of per-round ratios, which
// a round the machine preempted does not move.
package cputime

import (
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is the processor time of the whole process so far, to the
// nanosecond: work on other threads (the collector's) counts.
func Process() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Thread is the processor time of the calling thread, which the caller
// locks to it (runtime.LockOSThread).
func Thread() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// Median is the middle of v, which it sorts; 0 for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
