package main

import (
	"encoding/json"
	"flag"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/edgemq/edgemq/edge/mq"
)

// jsonFlag adds -json to a command that prints data.
func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print JSON instead of text: one document, or for a stream (send, consume) one object a line")
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a tabwriter for a text table: columns separated by tabs.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// humanBytes writes a byte count for people: 512 B, 1.5 KiB, 64 MiB, 2.25 GiB (three
// significant digits at most).
func humanBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n) / 1024
	u := 0
	for (v >= 1023.95 || v <= -1023.95) && u < len(units)-1 {
		v /= 1024
		u++
	}
	return threeDigits(v) + " " + units[u]
}

// humanDuration writes a duration for people, in the unit that suits it and three
// significant digits: 850ns, 12.3µs, 1.46ms, 2.5s, 3m20s.
func humanDuration(d time.Duration) string {
	switch a := d.Abs(); {
	case a < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case a < time.Millisecond-500*time.Nanosecond:
		return threeDigits(float64(d)/float64(time.Microsecond)) + "µs"
	case a < time.Second-500*time.Microsecond:
		return threeDigits(float64(d)/float64(time.Millisecond)) + "ms"
	case a < time.Minute:
		return threeDigits(float64(d)/float64(time.Second)) + "s"
	}
	return d.Round(time.Second).String()
}

// threeDigits formats v with three significant digits, without trailing zeros: 1.5, 12.3,
// 999, 1000 (v below 10000).
func threeDigits(v float64) string {
	prec := 2
	switch a := abs(v); {
	case a >= 99.95:
		prec = 0
	case a >= 9.995:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if prec > 0 {
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		if s[len(s)-1] == '.' {
			s = s[:len(s)-1]
		}
	}
	return s
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// humanCount writes a count with thousands separators: 1,234,567.
func humanCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// jsonTime is a unix-millisecond time written as RFC 3339 in UTC, with milliseconds.
type jsonTime int64

func (t jsonTime) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z07:00"))), nil
}

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return err
	}
	tt, err := time.Parse(time.RFC3339, s)
	*t = jsonTime(tt.UnixMilli())
	return err
}

// messageJSON is a message as consume -json prints it, one a line.
type messageJSON struct {
	MsgID          string            `json:"msgId"`
	Topic          string            `json:"topic"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	CommitLogPos   int64             `json:"commitLogOffset"`
	Tags           string            `json:"tags,omitempty"`
	Keys           string            `json:"keys,omitempty"`
	Properties     map[string]string `json:"properties,omitempty"`
	BornTime       jsonTime          `json:"bornTime"`
	StoreTime      jsonTime          `json:"storeTime"`
	ReconsumeTimes int32             `json:"reconsumeTimes,omitempty"`
	// Body is the body when it is UTF-8 text; BodyBase64 otherwise.
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"bodyBase64,omitempty"`
}

func newMessageJSON(m *mq.MessageExt) messageJSON {
	j := messageJSON{
		MsgID: m.MsgID(), Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset,
		CommitLogPos: m.CommitLogOffset, Tags: m.Tags, Keys: m.Keys, Properties: m.Properties,
		BornTime: jsonTime(m.BornTime), StoreTime: jsonTime(m.StoreTime), ReconsumeTimes: m.ReconsumeTimes,
	}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		j.Body = &s
	} else {
		j.BodyBase64 = m.Body
	}
	return j
}
