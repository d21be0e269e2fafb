package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// Serve reads lines from r and writes one reply line to w for each, in
// order, until r ends or ctx is done (PROTOCOL.md, "Framing"). Only replies
// are written to w (rule R1). When ctx ends (SIGTERM), Serve stops reading:
// the line in flight is answered, its running calls cancelled and each
// given its result (rule R2), and Serve returns nil. It returns nil at the
// end of input, or the error that stopped reading or writing.
func (g *Gateway) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriter(w)
	// The reader runs ahead by a few batches of lines, so that replies to
	// lines that arrive together go out in one write; it is left blocked
	// on r when ctx ends, since a read cannot be interrupted, and lines
	// read but not begun by then are not answered. A batch is the lines
	// already buffered together, handed over at once and held in one
	// string: one channel operation and one copy for them all.
	batches := make(chan []read, 16)
	go func() {
		for {
			rs := readLines(br, g.opts.MaxLineBytes)
			select {
			case batches <- rs:
			case <-ctx.Done():
				return
			}
			if err := rs[len(rs)-1].err; err != nil && !errors.Is(err, errTooLong) {
				return
			}
		}
	}()
	for {
		var rs []read
		select {
		case rs = <-batches:
			// The next lines were already read: their replies follow in
			// the same write.
		default:
			// No line waits: what is answered goes out now, so an agent that
			// waits for its answer before it sends more is never held.
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("writing standard output: %w", err)
			}
			select {
			case <-ctx.Done():
				g.log.Info("stopping: no more lines are read", "cause", context.Cause(ctx))
				return bw.Flush()
			case rs = <-batches:
			}
		}
		for _, in := range rs {
			if ctx.Err() != nil {
				g.log.Info("stopping: no more lines are read", "cause", context.Cause(ctx))
				return bw.Flush()
			}
			line, err := in.line, in.err
			var reply []byte
			switch {
			case errors.Is(err, errTooLong):
				g.log.Warn("line too long", "limit", g.opts.MaxLineBytes)
				reply = errorReply("the line is longer than the limit of %d bytes and was skipped; send smaller inputs or raise --max-line-bytes.", g.opts.MaxLineBytes)
			case err == io.EOF && len(line) == 0:
				return bw.Flush()
			case err != nil && err != io.EOF:
				bw.Flush()
				return fmt.Errorf("reading standard input: %w", err)
			case blank(line):
				if err == io.EOF {
					return bw.Flush()
				}
				continue
			default:
				// Appended to the writer's own free space: bufio's way to
				// encode into its buffer without a copy.
				reply = g.handle(ctx, line, in.text, bw.AvailableBuffer())
			}
			if _, werr := bw.Write(reply); werr != nil {
				return fmt.Errorf("writing standard output: %w", werr)
			}
			if err == io.EOF {
				return bw.Flush()
			}
		}
	}
}

// read is a line as read, and as a string, or why it could not be.
type read struct {
	line []byte
	text string
	err  error
}

var errTooLong = errors.New("line too long")

// maxBatch is the most lines readLines hands over at once.
const maxBatch = 64

// readLines reads one line, waiting for it, and then those already
// buffered whole behind it, up to maxBatch; the last one read is the
// one with an error other than errTooLong, if any.
func readLines(br *bufio.Reader, limit int) []read {
	// Sized for the whole lines buffered once the first byte has come.
	br.Peek(1)
	size, n := 0, 1
	for next, _ := br.Peek(br.Buffered()); n <= maxBatch; n++ {
		i := bytes.IndexByte(next[size:], '\n')
		if i < 0 {
			break
		}
		size += i + 1
	}
	buf := make([]byte, 0, size)
	rs, ends := make([]read, 0, n), make([]int, 0, 2*n)
	for {
		start := len(buf)
		var err error
		buf, err = readLine(br, limit, buf)
		rs, ends = append(rs, read{err: err}), append(ends, start, len(buf))
		if err != nil && !errors.Is(err, errTooLong) || len(rs) == maxBatch {
			break
		}
		if next, _ := br.Peek(br.Buffered()); bytes.IndexByte(next, '\n') < 0 {
			break
		}
	}
	// The same bytes as a string, not a copy: buf is written by no one
	// once read (each line is handed over capped, so an append copies),
	// and it lives as long as any string of it does.
	text := unsafe.String(unsafe.SliceData(buf), len(buf))
	for i := range rs {
		a, b := ends[2*i], ends[2*i+1]
		rs[i].line, rs[i].text = buf[a:b:b], text[a:b]
	}
	return rs
}

// readLine appends one line without its terminator ("\n" or "\r\n") to
// buf. A line whose content is over limit bytes is read to its end and
// dropped, and errTooLong returned, so the next line is intact.
func readLine(br *bufio.Reader, limit int, buf []byte) ([]byte, error) {
	start := len(buf)
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)-start+len(chunk) > limit+2 { // +2: room for "\r\n"
				tooLong, buf = true, buf[:start]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong {
			content := bytes.TrimSuffix(buf[start:], []byte("\n"))
			if len(content) < len(buf)-start {
				content = bytes.TrimSuffix(content, []byte("\r"))
			}
			if len(content) <= limit {
				return buf[:start+len(content)], err
			}
		}
		return buf[:start], errTooLong
	}
}

// blank reports whether a line holds only JSON whitespace. Other white
// space (U+00A0, VT, FF, U+2028) is neither JSON whitespace nor JSON, and
// gets an error line.
func blank(line []byte) bool { return len(bytes.Trim(line, " \t\r\n")) == 0 }
