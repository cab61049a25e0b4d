package smaps

import (
	"strings"
	"testing"
)

const sample = `00400000-0066c000 r-xp 00000000 fe:00 9999537                            /usr/bin/edgemq
Size:               2480 kB
Rss:                2288 kB
7f366ae00000-7f366ee00000 rw-s 00000000 fe:00 9999546                    /data/commitlog/00000000000067108864.log
Size:              65536 kB
Rss:                2048 kB
Pss:                2048 kB
7f366f000000-7f366f040000 rw-p 00000000 00:00 0 
Rss:                 244 kB
7f3673460000-7f36735a0000 rw-s 00000000 fe:00 9999572                    /data/consumequeue/T/3/00000000000000196608.cq
Rss:                  68 kB
7f3673600000-7f3673700000 rw-s 00000000 fe:00 9999573                    /data/with space/x.log
Rss:                  12 kB
`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(string) bool
		want  int64
		found bool
	}{
		{"dir", Under("/data"), (2048 + 68 + 12) << 10, true},
		{"subdir", Under("/data/consumequeue/"), 68 << 10, true},
		{"file", File("/data/commitlog/00000000000067108864.log"), 2048 << 10, true},
		{"path with a space", File("/data/with space/x.log"), 12 << 10, true},
		{"prefix is not a dir", Under("/dat"), 0, false},
		{"anonymous mappings never match", func(p string) bool { return p == "" }, 0, false},
		{"none", File("/nope"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := parse(strings.NewReader(sample), tc.match)
			if err != nil || got != tc.want || found != tc.found {
				t.Fatalf("parse = %d, %v, %v; want %d, %v", got, found, err, tc.want, tc.found)
			}
		})
	}
	if _, _, err := parse(strings.NewReader("00400000-0066c000 r-xp 00000000 fe:00 1 /f\nRss: x kB\n"), File("/f")); err == nil {
		t.Fatal("a bad Rss line parsed")
	}
}

func TestRssFindsOwnBinary(t *testing.T) {
	_, found, err := Rss(func(p string) bool { return strings.HasSuffix(p, ".test") })
	if err != nil {
		t.Skipf("no %s: %v", Path, err)
	}
	if !found {
		t.Fatal("the test binary's own mapping was not found")
	}
}
