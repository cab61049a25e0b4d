package remoting

import "testing"

// BenchmarkAppendZstdBatch encodes a batch of 1024 telemetry messages as the uplink sends it
// to a hub; bytes/s are of the uncompressed items.
func BenchmarkAppendZstdBatch(b *testing.B) {
	msgs := telemetry("T", 1024)
	plain, _ := AppendBatch(nil, msgs)
	b.SetBytes(int64(len(plain)))
	var out []byte
	for b.Loop() {
		out, _ = AppendZstdBatch(out[:0], msgs)
	}
	b.ReportMetric(float64(len(out))/1024, "B/msg")
}

// BenchmarkDecodeZstdBatch decodes what BenchmarkAppendZstdBatch encodes, as a hub does.
func BenchmarkDecodeZstdBatch(b *testing.B) {
	body, _ := AppendZstdBatch(nil, telemetry("T", 1024))
	for b.Loop() {
		if _, err := DecodeZstdBatch(body, 16<<20); err != nil {
			b.Fatal(err)
		}
	}
}
