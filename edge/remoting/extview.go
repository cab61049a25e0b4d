package remoting

// extViewPairs is how many fields an extView holds without a map: more than any request
// or reply of a producer or consumer carries.
const extViewPairs = 24

// extView reads the extension fields a Reader with LazyExt kept undecoded (Command.raw):
// its pairs are substrings of them, so reading a header's few fields allocates nothing.
// A header of more fields than extViewPairs spills them into a map.
type extView struct {
	n     int
	pairs [extViewPairs][2]string
	more  map[string]string // the fields past pairs, when there are more
}

// load reads raw, binary-encoded extension fields that decodeBinaryHeader checked.
func (v *extView) load(raw string) {
	for len(raw) > 0 {
		k, val, rest, err := cutExtField(raw)
		if err != nil {
			return // not reached: raw was checked
		}
		raw = rest
		v.set(k, val)
	}
}

// set records one field; a later field of the same key replaces it, as in a map.
func (v *extView) set(k, val string) {
	if v.more != nil {
		v.more[k] = val
		return
	}
	for i := range v.n {
		if v.pairs[i][0] == k {
			v.pairs[i][1] = val
			return
		}
	}
	if v.n < len(v.pairs) {
		v.pairs[v.n] = [2]string{k, val}
		v.n++
		return
	}
	v.more = v.toMap()
	v.more[k] = val
}

// get returns the value of key.
func (v *extView) get(key string) (string, bool) {
	if v.more != nil {
		val, ok := v.more[key]
		return val, ok
	}
	for i := range v.n {
		if v.pairs[i][0] == key {
			return v.pairs[i][1], true
		}
	}
	return "", false
}

// toMap returns the fields as a map (nil when there are none).
func (v *extView) toMap() map[string]string {
	if v.more != nil {
		return v.more
	}
	if v.n == 0 {
		return nil
	}
	m := make(map[string]string, v.n)
	for _, p := range v.pairs[:v.n] {
		m[p[0]] = p[1]
	}
	return m
}

// fields sets f to read c's extension fields for a header parser: Ext, or the fields a
// lazy Reader kept.
func (c *Command) fields(f *fields) {
	if c.Ext == nil && c.raw != "" {
		f.view.load(c.raw)
		f.lazy = true
		return
	}
	f.ext = c.Ext
}

// ParseSendHeader is ParseSendHeader of c's code and fields, without making a map of
// fields a lazy Reader kept.
func (c *Command) ParseSendHeader() (SendHeader, error) {
	var f fields
	c.fields(&f)
	return parseSendHeader(c.Code, &f)
}

// ParsePullHeader is ParsePullHeader of c's fields, without making a map of fields a lazy
// Reader kept.
func (c *Command) ParsePullHeader() (PullHeader, error) {
	var f fields
	c.fields(&f)
	return parsePullHeader(&f)
}

// ParseSendResponseHeader is ParseSendResponseHeader of c's fields, without making a map
// of fields a lazy Reader kept.
func (c *Command) ParseSendResponseHeader() (SendResponseHeader, error) {
	var f fields
	c.fields(&f)
	return parseSendResponseHeader(&f)
}

// ParsePullResponseHeader is ParsePullResponseHeader of c's fields, without making a map
// of fields a lazy Reader kept.
func (c *Command) ParsePullResponseHeader() (PullResponseHeader, error) {
	var f fields
	c.fields(&f)
	return parsePullResponseHeader(&f)
}

// replyMore reports whether c, a pull's reply, says that its pull streams on
// (PullResponseHeader.More).
func replyMore(c *Command) bool {
	var f fields
	c.fields(&f)
	return f.i32(extMore, false, 0) != 0
}
