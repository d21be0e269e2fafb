package trace

import (
	"encoding/binary"
	"os"
	"syscall"
)

// interpreterMains are the dynamic symbols by which an ELF program is an
// interpreter's build whatever its file is named: the main entry of
// its language's runtime, which its main calls (Py_BytesMain, node::Start,
// ruby_run_node, Tcl_Main: imported from the runtime's library or its
// own), or the runtime itself defined in the program (perl_run, lua_pcall,
// php_execute_script, bash's execute_command), which an embedder such
// as vim only imports. true: only where the program defines it.
var interpreterMains = map[string]bool{
	"Py_BytesMain": false, "Py_Main": false, "_Py_UnixMain": false, "_ZN4node5StartEiPPc": false, "ruby_run_node": false, "Tcl_Main": false, "Tcl_MainEx": false,
	"perl_run": true, "lua_pcall": true, "php_execute_script": true, "execute_command": true, "mrb_load_file": true,
}

// maxSymbols bounds what is read of a program's dynamic symbols (node's
// are some 75,000, 5 MB with their names).
const maxSymbols = 64 << 20

// carriesInterpreter reports whether the ELF program at file (a
// process's /proc/PID/exe) is a build of an interpreter by its dynamic
// symbols (interpreterMains), however it is named; kept by the file as
// it is; one the tracer cannot open is taken for one (fail closed). Not
// known as one: a 32-bit or big-endian ELF, one without section headers
// (the README's caveat).
func (t *tracer) carriesInterpreter(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		// One its user may run and not read (mode 0111 under a gateway
		// that is not root) could be one: its arguments are judged.
		return true
	}
	defer f.Close()
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil {
		return true
	}
	k := fileKey{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
	if v, ok := t.carries[k]; ok {
		return v
	}
	v := elfCarries(f, st.Size)
	t.carries[k] = v
	return v
}

func elfCarries(f *os.File, size int64) bool {
	le := binary.LittleEndian
	h := make([]byte, 64)
	if _, err := f.ReadAt(h, 0); err != nil || string(h[:4]) != "\x7fELF" || h[4] != 2 || h[5] != 1 {
		return false
	}
	shoff, shentsize, shnum := int64(le.Uint64(h[0x28:])), int64(le.Uint16(h[0x3a:])), int64(le.Uint16(h[0x3c:]))
	if shentsize < 64 || shnum == 0 || shoff <= 0 || shoff > size || shentsize*shnum > size-shoff {
		return false
	}
	sh := make([]byte, shentsize*shnum)
	if _, err := f.ReadAt(sh, shoff); err != nil {
		return false
	}
	section := func(i int64) (typ uint32, off, sz int64, link int64) {
		s := sh[i*shentsize:]
		return le.Uint32(s[4:]), int64(le.Uint64(s[0x18:])), int64(le.Uint64(s[0x20:])), int64(le.Uint32(s[0x28:]))
	}
	read := func(off, sz int64) []byte {
		if off < 0 || sz <= 0 || sz > maxSymbols || off+sz > size {
			return nil
		}
		b := make([]byte, sz)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil
		}
		return b
	}
	const shtDynsym = 11
	for i := int64(0); i < shnum; i++ {
		typ, off, sz, link := section(i)
		if typ != shtDynsym || link >= shnum {
			continue
		}
		_, soff, ssz, _ := section(link)
		syms, strs := read(off, sz), read(soff, ssz)
		for j := 0; j+24 <= len(syms); j += 24 {
			name, shndx := int(le.Uint32(syms[j:])), le.Uint16(syms[j+6:])
			if name <= 0 || name >= len(strs) {
				continue
			}
			end := name
			for end < len(strs) && strs[end] != 0 {
				end++
			}
			if defined, ok := interpreterMains[string(strs[name:end])]; ok && (!defined || shndx != 0) {
				return true
			}
		}
	}
	return false
}
