// Package lockedbuf is a bytes.Buffer that goroutines may write and read
// at once: the sink of a logger or a child process's output that a test
// reads while they run.
package lockedbuf

import (
	"bytes"
	"sync"
)

// A Buffer is a bytes.Buffer behind a mutex; the zero value is empty and
// ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what has been written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
