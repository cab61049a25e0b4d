package zbatch

import (
	"testing"

	"github.com/edgemq/edgemq/edge/remoting"
)

// BenchmarkAppend encodes a batch of 1024 telemetry messages as the uplink sends it
// to a hub; bytes/s are of the uncompressed items.
func BenchmarkAppend(b *testing.B) {
	msgs := telemetry("T", 1024)
	plain, _ := remoting.AppendBatch(nil, msgs)
	b.SetBytes(int64(len(plain)))
	var out []byte
	for b.Loop() {
		out, _ = Append(out[:0], msgs)
	}
	b.ReportMetric(float64(len(out))/1024, "B/msg")
}

// BenchmarkDecode decodes what BenchmarkAppend encodes, as a hub does.
func BenchmarkDecode(b *testing.B) {
	body, _ := Append(nil, telemetry("T", 1024))
	for b.Loop() {
		if _, err := Decode(body, 16<<20); err != nil {
			b.Fatal(err)
		}
	}
}
