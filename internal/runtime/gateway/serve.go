package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	type read struct {
		line []byte
		err  error
	}
	// The reader runs ahead by a few lines, so that replies to lines that
	// arrive together go out in one write; it is left blocked on r when ctx
	// ends, since a read cannot be interrupted, and lines read but not begun
	// by then are not answered.
	lines := make(chan read, 64)
	go func() {
		for {
			line, err := readLine(br, g.opts.MaxLineBytes)
			select {
			case lines <- read{line, err}:
			case <-ctx.Done():
				return
			}
			if err != nil && !errors.Is(err, errTooLong) {
				return
			}
		}
	}()
	for {
		var in read
		select {
		case in = <-lines:
			// The next line was already read: its reply follows this one's
			// in the same write.
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
			case in = <-lines:
			}
		}
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
			reply = g.handle(ctx, line, bw.AvailableBuffer())
		}
		if _, werr := bw.Write(reply); werr != nil {
			return fmt.Errorf("writing standard output: %w", werr)
		}
		if err == io.EOF {
			return bw.Flush()
		}
	}
}

var errTooLong = errors.New("line too long")

// readLine reads one line without its terminator ("\n" or "\r\n"). A line
// whose content is over limit bytes is read to its end and dropped, and
// errTooLong returned, so the next line is intact.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+2 { // +2: room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong {
			content := bytes.TrimSuffix(line, []byte("\n"))
			if len(content) < len(line) {
				content = bytes.TrimSuffix(content, []byte("\r"))
			}
			if len(content) <= limit {
				return content, err
			}
		}
		return nil, errTooLong
	}
}

// blank reports whether a line holds only JSON whitespace. Other white
// space (U+00A0, VT, FF, U+2028) is neither JSON whitespace nor JSON, and
// gets an error line.
func blank(line []byte) bool { return len(bytes.Trim(line, " \t\r\n")) == 0 }
