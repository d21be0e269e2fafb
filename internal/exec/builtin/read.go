package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"aimon.dev/gw/tools"
)

// ReadInput is the input of Read; it mirrors #ReadInput.
type ReadInput struct {
	FilePath string `json:"file_path"`
	Offset   *int   `json:"offset"`
	Limit    *int   `json:"limit"`
}

// Read returns a text file's lines numbered like cat -n and records the file
// as read in the session (rule C6). Concurrent-safe; honours cancellation.
type Read struct{}

// DefaultReadLimit is how many lines Read returns when limit is not given.
const DefaultReadLimit = 2000

// EmptyFile is Read's answer for a file with no content.
const EmptyFile = "[System Warning: This file is empty]"

// Run reads the file.
func (Read) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p ReadInput
	if r, ok := bind(env, "Read", in, &p); !ok {
		return r
	}
	offset, limit := 1, DefaultReadLimit
	if p.Offset != nil {
		offset = *p.Offset
	}
	if p.Limit != nil {
		limit = *p.Limit
	}
	if offset < 1 {
		return refuse(env, "Read", "Parameter 'offset' must be 1 or more (lines are numbered from 1), got %d.", offset)
	}
	if limit < 1 {
		return refuse(env, "Read", "Parameter 'limit' must be 1 or more, got %d.", limit)
	}
	if r, ok := trailingSlash(env, "Read", p.FilePath); !ok {
		return r
	}
	path, err := resolve(env, "file_path", p.FilePath)
	if err != nil {
		return refuse(env, "Read", "%s", err)
	}
	env.Logger().Debug("Read", "path", path, "offset", offset, "limit", limit)

	// readWhole opens only a path without links, which is where it is
	// named, so its name says whether it is a secret; following the links
	// of one that has them is left to the way that opens those.
	if r, ok := concealingAt(env, "Read", path, path); !ok {
		return r
	}
	if data, st, ok := readWhole(anchorDir(env), path); ok {
		if bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
			return binaryFile(env, path)
		}
		text, lines, err := renderBytes(ctx, data, offset, limit)
		if err != nil {
			return cancelled(env, "Read", ctx)
		}
		return readAnswer(env, path, st, offset, text, lines)
	}
	if r, ok := concealing(env, "Read", path); !ok {
		return r
	}
	a, err := openReadAnchor(env)
	if err != nil {
		return openFailure(env, "Read", path, err)
	}
	defer a.Close()
	// Opened without blocking and checked on the descriptor: a FIFO would
	// block, and a device such as /dev/zero never ends.
	f, fi, r, ok := a.openRegular("Read", path, os.O_RDONLY, "Use Glob to list the files in it.")
	if !ok {
		return r
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, readBufSize(fi.Size()))
	if head, _ := br.Peek(sniffLen); bytes.IndexByte(head, 0) >= 0 {
		return binaryFile(env, path)
	}
	text, lines, err := renderLines(ctx, br, offset, limit, fi.Size())
	if err != nil {
		if ctx.Err() != nil {
			return cancelled(env, "Read", ctx)
		}
		return readFailure(env, "Read", path, err)
	}
	return readAnswer(env, path, stateOf(fi), offset, text, lines)
}

func binaryFile(env *tools.Env, path string) tools.Result {
	return refuse(env, "Read", "%s looks like a binary file (it holds NUL bytes); Read returns text files only.", path)
}

// readAnswer records the file read, in state st, and answers with its
// numbered lines text, of lines lines seen.
func readAnswer(env *tools.Env, path string, st tools.FileState, offset int, text string, lines int) tools.Result {
	markRead(env, path, st)
	switch {
	case lines == 0:
		return tools.OK(EmptyFile)
	case text == "":
		return tools.OK(fmt.Sprintf("[System Warning: offset %d is past the end of the file, which has %d lines]", offset, lines))
	}
	return tools.OK(text)
}

// sniffLen is how much of a file Read looks at for NUL bytes.
const sniffLen = 8000

// maxReadBuf bounds Read's buffer; longer lines are read in pieces.
const maxReadBuf = 64 * 1024

// readBufSize sizes Read's buffer to a file of size bytes as its descriptor
// stated it: one byte more, so that the first fill also sees the end, since
// a 64 KiB buffer per call of a small file was most of the call's cost
// (issue 32). A size of 0 is also what kernel interfaces state, whatever
// they hold, so it gets the full buffer.
func readBufSize(size int64) int {
	if size <= 0 || size >= maxReadBuf {
		return maxReadBuf
	}
	return max(int(size)+1, 512)
}

// renderLines numbers lines offset..offset+limit-1 of r like cat -n, cutting
// long lines, and returns them with the number of lines it saw. size is the
// file's stated size, to size the answer once for a small file.
func renderLines(ctx context.Context, r *bufio.Reader, offset, limit int, size int64) (string, int, error) {
	var scratch []byte
	return numberLines(ctx, offset, limit, size, func() ([]byte, error) {
		line, err := readLine(r, scratch[:0], keepLine)
		scratch = line
		return line, err
	})
}

// renderBytes is renderLines of a file read whole.
func renderBytes(ctx context.Context, data []byte, offset, limit int) (string, int, error) {
	return numberLines(ctx, offset, limit, int64(len(data)), func() ([]byte, error) {
		var line []byte
		line, data = nextLine(data, keepLine)
		if line == nil {
			return nil, io.EOF
		}
		return line, nil
	})
}

// keepLine is how much of a line Read keeps: more than it shows, since a
// line is cut at MaxLineChars characters of up to four bytes.
const keepLine = 4*MaxLineChars + 4

// numberLines numbers the lines next gives, as renderLines says.
func numberLines(ctx context.Context, offset, limit int, size int64, next func() ([]byte, error)) (string, int, error) {
	out := make([]byte, 0, min(max(size, 0)+max(size, 0)/4, maxReadBuf))
	n := 0
	for {
		if n%1024 == 0 && ctx.Err() != nil {
			return "", n, ctx.Err()
		}
		line, err := next()
		if errors.Is(err, io.EOF) {
			return asString(out), n, nil
		}
		if err != nil {
			return "", n, err
		}
		n++
		if n < offset {
			continue
		}
		if n >= offset+limit {
			return asString(out), n, nil
		}
		out = appendNumbered(out, n, line)
	}
}

// asString is out as a string without a copy, as strings.Builder does; out
// is not written after.
func asString(out []byte) string { return unsafe.String(unsafe.SliceData(out), len(out)) }

// appendNumbered appends one line as cat -n shows it: the number right-aligned
// in six columns ("%6d→"), the line, cut at MaxLineChars characters.
func appendNumbered(out []byte, n int, line []byte) []byte {
	var num [20]byte
	digits := strconv.AppendInt(num[:0], int64(n), 10)
	for range 6 - len(digits) {
		out = append(out, ' ')
	}
	out = append(out, digits...)
	out = append(out, "→"...)
	if cut, ok := cutAt(line); ok {
		out = append(out, line[:cut]...)
		out = append(out, "..."...)
	} else {
		out = append(out, line...)
	}
	return append(out, '\n')
}

// cutAt is the byte index where a line longer than MaxLineChars characters
// is cut; ok is false when it is short enough.
func cutAt(line []byte) (int, bool) {
	if len(line) <= MaxLineChars {
		return 0, false
	}
	i := 0
	for range MaxLineChars {
		_, size := utf8.DecodeRune(line[i:])
		i += size
		if i >= len(line) {
			return 0, false
		}
	}
	return i, true
}

// readLine appends the next line to buf without its line ending, keeping at
// most keep bytes of it so that one huge line cannot exhaust memory. It
// returns io.EOF only when no line is left.
func readLine(r *bufio.Reader, buf []byte, keep int) ([]byte, error) {
	got := false
	for {
		chunk, err := r.ReadSlice('\n')
		got = got || len(chunk) > 0
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && got:
			return bytes.TrimSuffix(buf, []byte("\r")), nil
		default:
			return buf, err
		}
	}
}

// nextLine is readLine of data held whole: the first line, kept to keep
// bytes, and the rest of data; a nil line when data is empty.
func nextLine(data []byte, keep int) (line, rest []byte) {
	if len(data) == 0 {
		return nil, nil
	}
	end, nl := len(data), false
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		end, nl = i+1, true
	}
	line, rest = data[:min(end, keep):min(end, keep)], data[end:]
	if nl {
		line = bytes.TrimSuffix(line, []byte("\n"))
	}
	return bytes.TrimSuffix(line, []byte("\r")), rest
}

// openFailure turns an error opening path into a sentence.
func openFailure(env *tools.Env, tool, path string, err error) tools.Result {
	if r, ok := anchorFailure(env, tool, err); ok {
		return r
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse(env, tool, "File %s does not exist. Check the path, or use Glob to find the file.", path)
	case errors.Is(err, fs.ErrPermission):
		return refuse(env, tool, "Permission denied opening %s.", path)
	}
	return fail(env, tool, err, "Could not open %s: %v.", path, err)
}
