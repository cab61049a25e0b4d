package remoting

import (
	"reflect"
	"testing"
)

// jsonHeaderCases are headers both in and out of the scanner's plain form.
var jsonHeaderCases = []struct {
	name  string
	h     string
	plain bool // scanJSONHeader reads it
}{
	{"go client send", `{"code":310,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"a":"pg","b":"T","e":"-1","i":"UNIQ_KEY\u0001x"}}`, true},
	{"go client plain", `{"code":310,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"a":"pg","b":"T","e":"-1"}}`, true},
	{"java", `{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}`, true},
	{"strings for numbers", `{"code":"34","language":9,"version":"317","opaque":"-5","flag":"1"}`, true},
	{"white space", " \t{ \"code\" : 1 ,\n\"extFields\" : { \"k\" : 5 , \"t\" : true , \"z\" : null } }\r\n", true},
	{"nulls", `{"code":null,"remark":null,"language":null,"extFields":null}`, true},
	{"empty", `{}`, true},
	{"unknown language", `{"language":"COBOL"}`, true},
	{"escapes", `{"remark":"a\"b\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00\ud800\u0041"}`, true},
	{"bad escape", `{"remark":"\x"}`, false},
	{"escaped key", `{"\u0063ode":3,"extFields":{"\u00e9":"1"}}`, true},
	{"float", `{"extFields":{"f":1.5}}`, false},
	{"nested unknown", `{"x":{"y":1}}`, false},
	{"folded name", `{"CODE":3}`, false},
	{"repeated ext key", `{"extFields":{"k":"1","k":null}}`, false},
	{"repeated extFields", `{"extFields":{"k":"1"},"extFields":{"j":"2"}}`, false},
	{"leading zero", `{"code":01}`, false},
	{"code out of range", `{"code":40000}`, false},
	{"trailing garbage", `{"code":1}x`, false},
	{"not an object", `null`, false},
	{"cut short", `{"code":1`, false},
}

// TestScanJSONHeader checks that the scanner reads its plain form as encoding/json does,
// and leaves the rest to it.
func TestScanJSONHeader(t *testing.T) {
	for _, tc := range jsonHeaderCases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := scanJSONHeader([]byte(tc.h))
			if ok != tc.plain {
				t.Fatalf("scanned %v, want %v", ok, tc.plain)
			}
			if !ok {
				return
			}
			want, err := decodeJSONHeaderSlow([]byte(tc.h))
			if err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if !reflect.DeepEqual(c, want) {
				t.Fatalf("got %+v, want %+v", c, want)
			}
		})
	}
}

// FuzzScanJSONHeader checks that whatever the scanner reads, encoding/json reads the same.
func FuzzScanJSONHeader(f *testing.F) {
	for _, tc := range jsonHeaderCases {
		f.Add([]byte(tc.h))
	}
	// Repeated, null, oddly cased and out-of-range fields; bad escapes and bytes.
	f.Add([]byte(`{"code":0,"language":"GO","version":317,"opaque":-5,"flag":1,"remark":"é","extFields":{"n":12,"b":true,"s":"x","z":null,"s":null}}`))
	f.Add([]byte(` { "Code" : 1 } `))
	f.Add([]byte(`{"extFields":{"a":"1"},"extFields":{"b":"2"},"code":null,"code":7}`))
	f.Add([]byte(`{"code":32768}`))
	f.Add([]byte(`{"remark":"a\u0000"} x`))
	f.Add([]byte("{\"remark\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, h []byte) {
		c, ok := scanJSONHeader(h)
		if !ok {
			return
		}
		want, err := decodeJSONHeaderSlow(h)
		if err != nil {
			t.Fatalf("scanned %q, which encoding/json refuses: %v", h, err)
		}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("%q: scanned %+v, encoding/json %+v", h, c, want)
		}
	})
}

// BenchmarkDecodeJSONHeader decodes a Go client's SEND_MESSAGE_V2 header.
func BenchmarkDecodeJSONHeader(b *testing.B) {
	h := []byte(`{"code":310,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"a":"pg","b":"TopicTest","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0","i":"UNIQ_KEY\u0001ABCDEF\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeJSONHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}
