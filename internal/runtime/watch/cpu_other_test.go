//go:build !unix

package watch

import "time"

// cpuTime is not measured here; the benchmark's cpu-ms/op then reads 0.
func cpuTime() time.Duration { return 0 }
