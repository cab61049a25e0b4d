package server

import (
	"fmt"
	"strconv"

	"github.com/edgemq/edgemq/edge/remoting"
)

// fields reads a request header's extension fields, keeping the first problem: a missing
// required field or a number that does not parse, an error wrapping remoting.ErrMalformed.
type fields struct {
	ext map[string]string
	err error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: "+format, append([]any{remoting.ErrMalformed}, args...)...)
	}
}

// str returns the first of names present; "" (and a failure if required) when none is.
func (f *fields) str(required bool, names ...string) string {
	for _, n := range names {
		if v, ok := f.ext[n]; ok {
			return v
		}
	}
	if required {
		f.fail("header field %s missing", names[0])
	}
	return ""
}

func (f *fields) int(bits int, required bool, names ...string) int64 {
	v := f.str(required, names...)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		f.fail("header field %s: %q is not an int%d", names[0], v, bits)
	}
	return n
}

func (f *fields) int32(required bool, names ...string) int32 {
	return int32(f.int(32, required, names...))
}
func (f *fields) int64(required bool, names ...string) int64 { return f.int(64, required, names...) }

// bool reads a Java boolean ("true", "false"); anything else is false.
func (f *fields) bool(names ...string) bool {
	v, _ := strconv.ParseBool(f.str(false, names...))
	return v
}
